// A joiner's round trips to the members the server named in its assignment (`probePeers`, regional
// Moshpit jobs): link to each, ping a few times, keep the smallest round trip. The runtime reports
// them (`peers:rtt`) before it says its model is loaded, so its first groups already follow its
// links. Bounded in time, and a peer that cannot be reached is simply not reported.
import { FrameRouter, type Transport } from '@tabfleet/collective';
import { realClock, sleepOn, type Clock } from '@tabfleet/protocol';

/** Pings per peer (the smallest round trip counts: the others may wait behind other frames). */
const PINGS = 3;
const PING_GAP_MS = 30;
/** The whole probe, links included, ends after this (ms): it must not hold the join up for long. */
export const JOIN_PROBE_TIMEOUT_MS = 5_000;

export async function measurePeers(transport: Transport, peers: readonly string[], timeoutMs = JOIN_PROBE_TIMEOUT_MS, clock: Clock = transport.clock ?? realClock): Promise<Record<string, number>> {
  const sleep = (ms: number) => sleepOn(clock, ms);
  const router = FrameRouter.of(transport);
  const deadline = clock.now() + timeoutMs;
  const measured = () => peers.every((p) => router.rttMs(p) !== undefined);
  const pingAll = Promise.allSettled(peers.map(async (p) => {
    await transport.connect(p);
    for (let i = 0; i < PINGS; i++) {
      router.ping(p);
      await sleep(PING_GAP_MS);
    }
  }));
  await Promise.race([pingAll, sleep(timeoutMs)]);
  // The last pongs are still on their way.
  while (!measured() && clock.now() < deadline) await sleep(10);
  const out: Record<string, number> = {};
  for (const p of peers) {
    const ms = router.rttMs(p);
    if (ms !== undefined) out[p] = Math.round(ms * 10) / 10;
  }
  return out;
}
