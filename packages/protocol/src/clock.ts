// Time, injected: every part whose behaviour hangs on time (the server's round clock, the runtime's
// pacing and retries, the collective's deadlines and round trips, the in-memory network's delays)
// reads it from a Clock, so tests run that logic on fake time (`FakeClock`, '@tabfleet/protocol/testing').

export interface Clock {
  /** Milliseconds (wall-clock epoch ms for the real clocks). */
  now(): number;
  /** Runs `fn` after `ms`; returns a cancel function. */
  after(ms: number, fn: () => void): () => void;
}

/**
 * The wall clock and real timers. `unref`: timers do not keep a Node process alive (the server's
 * housekeeping); without it they do, as setTimeout's do (an op waiting on its deadline is work).
 */
export function wallClock(opts: { unref?: boolean } = {}): Clock {
  return {
    now: () => Date.now(),
    after(ms, fn) {
      const t = setTimeout(fn, ms);
      if (opts.unref) (t as { unref?: () => void }).unref?.();
      return () => clearTimeout(t);
    },
  };
}

/** Real time, timers like setTimeout's: the default of the runtime, the collective and the in-memory network. */
export const realClock: Clock = wallClock();

/** Real time whose timers never hold a Node process open (the server's). */
export const unrefClock: Clock = wallClock({ unref: true });

/** `ms` on `clock`. */
export function sleepOn(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.after(ms, resolve));
}
