// The runtime sends within the server's per-socket event budget: a burst of signaling (a tab opening
// links to a group's fifteen peers, an ICE candidate at a time) goes out paced, in order, rather than
// all at once to be refused past the server's burst (a refused `round:ready` left a member out of
// every sync). The socket is a fake that records when each event went; on fake time.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Signaler } from '@tabfleet/collective';
import { LIMITS, PACED_EVENT_BURST, PACED_EVENTS_PER_SECOND } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { VolunteerRuntime } from './runtime';
import { fakeVolunteerSocket } from './testing/fake-socket';

test('a burst of signaling goes out paced within the server\'s budget, in the order sent', async () => {
  const clock = new FakeClock(0);
  const signals: { n: number; at: number }[] = [];
  const sentAt: number[] = []; // every event asked an ack of (the runtime's work:request too)
  const fake = fakeVolunteerSocket(async (name, payload) => {
    sentAt.push(clock.now());
    if (name === 'signal') signals.push({ n: (payload as { data: { n: number } }).data.n, at: clock.now() });
    return { ok: true };
  });
  let signaler: Signaler | null = null;
  const engine = { setup: () => new Promise(() => {}) };
  const runtime = new VolunteerRuntime({
    socket: fake.socket, serverUrl: 'http://127.0.0.1:1', engine: engine as never, clock,
    createTransport: (_id, s) => ((signaler = s), { close() {} }) as never,
  });
  fake.deliver('welcome', { volunteerId: 'v-1', protocol: 1, serverTime: clock.now(), displayName: null, heartbeatMs: 60_000 });
  fake.deliver('round:begin', { jobId: 'job-1', roundId: 7, seq: 1, members: ['v-1', 'v-2'], mode: 'ring', began: 0, deadline: 60_000 });
  const burst = LIMITS.eventBurst * 1.5;
  for (let n = 0; n < burst; n++) signaler!.send('v-2', { n });
  await clock.advance(0);
  assert.equal(sentAt.length, PACED_EVENT_BURST, 'the pacer\'s burst at once, not all of them');
  await clock.advance(60_000);
  assert.equal(signals.length, burst);
  assert.deepEqual(signals.map((s) => s.n), [...signals.keys()], 'in the order sent');
  // No second holds more than the server takes in one (its rate, plus its burst for the first).
  for (const t of sentAt) {
    const inSecond = sentAt.filter((x) => x >= t && x < t + 1_000).length;
    assert.ok(inSecond <= LIMITS.eventsPerSecond + (t === 0 ? LIMITS.eventBurst : 0), `${inSecond} events in the second from ${t} ms`);
  }
  assert.ok(signals[burst - 1].at >= ((burst - PACED_EVENT_BURST - 1) / PACED_EVENTS_PER_SECOND) * 1000);
  runtime.stop();
});
