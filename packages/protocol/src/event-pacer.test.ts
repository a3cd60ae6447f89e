// The client's event pacer on fake time: a burst goes at once, the rest at the paced rate, every
// event in the order it was sent, and acks settle as the sends they wrap.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EventPacer, PACED_EVENT_BURST, PACED_EVENTS_PER_SECOND } from './event-pacer';
import { LIMITS } from './limits';
import { FakeClock } from './testing';

test('the pacer spends less than the server allows', () => {
  assert.ok(PACED_EVENTS_PER_SECOND < LIMITS.eventsPerSecond && PACED_EVENT_BURST < LIMITS.eventBurst);
});

test('a burst goes at once; the rest wait their turn at the paced rate, in the order sent', async () => {
  const clock = new FakeClock(0);
  const pacer = new EventPacer(clock);
  const sent: { i: number; at: number }[] = [];
  for (let i = 0; i < 200; i++) pacer.send(() => sent.push({ i, at: clock.now() }));
  assert.equal(sent.length, PACED_EVENT_BURST, 'the burst went at once');
  assert.equal(pacer.queued, 200 - PACED_EVENT_BURST);
  await clock.advance(1_000);
  assert.equal(sent.length, PACED_EVENT_BURST + PACED_EVENTS_PER_SECOND, 'one second later, one second of the rate more');
  await clock.advance(10_000);
  assert.equal(sent.length, 200);
  assert.equal(pacer.queued, 0);
  assert.deepEqual(sent.map((s) => s.i), [...sent.keys()], 'in the order sent');
  const lastAt = sent[199].at;
  const expected = ((200 - PACED_EVENT_BURST) / PACED_EVENTS_PER_SECOND) * 1000;
  assert.ok(Math.abs(lastAt - expected) <= 1_000 / PACED_EVENTS_PER_SECOND, `the last went at ${lastAt} ms, ${expected} expected`);
});

test('an event sent while others wait goes after them, even once a token is there', async () => {
  const clock = new FakeClock(0);
  const pacer = new EventPacer(clock, 10, 1);
  const order: string[] = [];
  pacer.send(() => order.push('a'));
  pacer.send(() => order.push('b'));
  clock.spend(500); // tokens refill meanwhile, but b waits for its timer
  pacer.send(() => order.push('c'));
  assert.deepEqual(order, ['a']);
  await clock.advance(1_000);
  assert.deepEqual(order, ['a', 'b', 'c']);
});

test('sendWithAck settles as the send does, and is sent in its turn', async () => {
  const clock = new FakeClock(0);
  const pacer = new EventPacer(clock, 10, 1);
  pacer.send(() => {});
  let sentAt = -1;
  const ok = pacer.sendWithAck(async () => {
    sentAt = clock.now();
    return 42;
  });
  const thrown = pacer.sendWithAck<number>(() => {
    throw new Error('socket gone');
  });
  const rejected = pacer.sendWithAck(() => Promise.reject(new Error('ack timed out')));
  assert.equal(await clock.run(ok), 42);
  assert.equal(sentAt, 100, 'sent when its token was due, not at once');
  await assert.rejects(clock.run(thrown), /socket gone/);
  await assert.rejects(clock.run(rejected), /ack timed out/);
});
