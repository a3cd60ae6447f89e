// Time, injected: every part whose behaviour hangs on time (the server's round clock, the runtime's
// pacing and retries, the collective's deadlines and round trips, the in-memory network's delays)
// reads it from a Clock, so tests run that logic on fake time (`FakeClock`, '@tabfleet/protocol/testing').

export interface Clock {
  /** Milliseconds (wall-clock epoch ms for the real clocks). */
  now(): number;
  /** Runs `fn` after `ms`; returns a cancel function. */
  after(ms: number, fn: () => void): () => void;
}

const timer = (unref: boolean) => (ms: number, fn: () => void): (() => void) => {
  const t = setTimeout(fn, ms);
  if (unref) (t as { unref?: () => void }).unref?.();
  return () => clearTimeout(t);
};

/**
 * Real time for what measures and paces (the runtime, the collective, the in-memory network, the
 * engine): epoch ms read from the monotonic, sub-millisecond performance clock (compute steps and
 * loopback round trips are under a millisecond; a wall-clock step never makes one negative), and
 * timers like setTimeout's (an op waiting on its deadline keeps Node up).
 */
export const realClock: Clock = {
  now: () => performance.timeOrigin + performance.now(),
  after: timer(false),
};

/** The server's: Date.now (what it records), and timers that never hold a Node process open. */
export const serverClock: Clock = {
  now: () => Date.now(),
  after: timer(true),
};

/** `ms` on `clock`. */
export function sleepOn(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.after(ms, resolve));
}
