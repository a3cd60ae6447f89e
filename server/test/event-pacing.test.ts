// Clients pace their events within the server's per-socket budget (EventPacer, @tabfleet/protocol):
// none is refused for rate. Before, a simulated volunteer sent as fast as its syncs went; at 40 syncs a
// second its `round:ready` was refused once the bucket ran dry, the server left it out of every sync
// after, and a job of three never ended (target-accuracy.test.ts, "a slow evaluator": hung in 2 of 92 runs
// beside a browser test; CI red once). The worker runtime sent the same way.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { EventPacer, LIMITS, mulberry32 } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { TokenBucket } from '../src/sockets/guard';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

/** How many of the events sent at `sentAt` the server's bucket refuses when each arrives up to `jitterMs` late. */
function refusedBy(sentAt: number[], jitterMs: number, seed: number): number {
  const random = mulberry32(seed);
  const arrivals = sentAt.map((t) => t + random() * jitterMs).sort((a, b) => a - b);
  let now = arrivals[0] ?? 0;
  const bucket = new TokenBucket(LIMITS.eventsPerSecond, LIMITS.eventBurst, () => now);
  let refused = 0;
  for (const t of arrivals) {
    now = t;
    if (!bucket.take()) refused++;
  }
  return refused;
}

test('paced events fit the server\'s bucket even when they arrive bunched, up to a second late each', async () => {
  const clock = new FakeClock(0);
  const pacer = new EventPacer(clock);
  const sentAt: number[] = [];
  // A flood at once, then bursts every 300 ms for ten seconds: the sends a fast sync loop makes.
  for (let i = 0; i < 300; i++) pacer.send(() => sentAt.push(clock.now()));
  for (let t = 0; t < 10_000; t += 300) {
    await clock.advance(300);
    for (let i = 0; i < 15; i++) pacer.send(() => sentAt.push(clock.now()));
  }
  await clock.advance(60_000);
  assert.equal(sentAt.length, 300 + 15 * 34);
  for (const seed of [1, 2, 3]) {
    assert.equal(refusedBy(sentAt, 0, seed), 0, 'on time');
    assert.equal(refusedBy(sentAt, 1_000, seed), 0, `up to 1 s late (seed ${seed})`);
  }
  // The same sends unpaced: the check refuses them.
  const unpaced = [...Array(300).fill(0), ...Array.from({ length: 34 * 15 }, (_, i) => 300 * (1 + Math.floor(i / 15)))];
  assert.ok(refusedBy(unpaced, 0, 1) > 100, 'unpaced, the server refuses most of a flood');
});

test('a simulated volunteer that sends faster than the server takes has none of its events refused', async () => {
  const sim = await server.volunteer();
  const refusedBefore = server.metrics.get('events_rejected', { code: 'rate_limited' });
  const status = { state: 'idle', step: 0, samplesPerSec: 0, bytesSent: 0, bytesReceived: 0 } as const;
  // Half again the server's burst, all at once (the unpaced sim had those past the burst refused).
  const acks = await Promise.all(Array.from({ length: LIMITS.eventBurst * 1.5 }, () => sim.emit('status', status)));
  const refused = acks.filter((a) => !a.ok).map((a) => (a.ok ? '' : a.error.code));
  assert.deepEqual(refused, [], `${refused.length} refused`);
  assert.equal(server.metrics.get('events_rejected', { code: 'rate_limited' }), refusedBefore);
});
