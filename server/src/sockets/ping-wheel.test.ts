import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '@tabfleet/protocol/testing';
import { PingWheel } from './ping-wheel';

describe('PingWheel', () => {
  it('visits every member once per interval, never more than a slice of them at a time', async () => {
    const clock = new FakeClock();
    const visits = new Map<number, number[]>();
    const wheel = new PingWheel<number>(10_000, (m) => visits.set(m, [...(visits.get(m) ?? []), clock.now()]), clock);
    for (let m = 0; m < 1_000; m++) wheel.add(m);
    let largestTick = 0;
    for (let t = 0; t < 30_000; t += 100) {
      const before = [...visits.values()].reduce((n, v) => n + v.length, 0);
      await clock.advance(100);
      largestTick = Math.max(largestTick, [...visits.values()].reduce((n, v) => n + v.length, 0) - before);
    }
    // 100 slices of 10 members, a tick every 100 ms.
    assert.equal(largestTick, 10);
    for (let m = 0; m < 1_000; m++) {
      const at = visits.get(m)!;
      assert.equal(at.length, 3);
      assert.equal(at[1] - at[0], 10_000);
      assert.equal(at[2] - at[1], 10_000);
    }
  });

  it('a busy event loop delays ticks, yet every member is still visited once per interval, late by one tick at most', async () => {
    const clock = new FakeClock();
    const visits = new Map<number, number[]>();
    const wheel = new PingWheel<number>(10_000, (m) => visits.set(m, [...(visits.get(m) ?? []), clock.now()]), clock);
    for (let m = 0; m < 1_000; m++) wheel.add(m);
    // Every timer fires up to 150 ms late. Scheduled from when each ran, a turn of 100 ticks took 12.5 s
    // here, and under heavier load more than the clients' 30 s ping timeout.
    for (let t = 0; t < 40_000; t += 250) {
      clock.spend(150);
      await clock.advance(100);
    }
    for (let m = 0; m < 1_000; m++) {
      const at = visits.get(m)!;
      assert.ok(at.length >= 3, `member ${m} visited ${at.length} times in 40 s`);
      for (let i = 1; i < at.length; i++) assert.ok(at[i] - at[i - 1] <= 10_000 + 250, `member ${m}: ${at[i] - at[i - 1]} ms between visits`);
    }
  });

  it('after a stall longer than the interval each member is visited once, and the wheel goes on from then', async () => {
    const clock = new FakeClock();
    const seen: number[] = [];
    const wheel = new PingWheel<number>(1_000, (m) => seen.push(m), clock);
    for (let m = 0; m < 100; m++) wheel.add(m);
    clock.spend(5_000);
    await clock.advance(0);
    assert.deepEqual(seen.sort((a, b) => a - b), Array.from({ length: 100 }, (_, i) => i));
    seen.length = 0;
    await clock.advance(100);
    assert.equal(seen.length, 10, 'one slice of ten per 100 ms again');
  });

  it('keeps slices even as members leave and come, and stops visiting one that left', async () => {
    const clock = new FakeClock();
    const seen: number[] = [];
    const wheel = new PingWheel<number>(1_000, (m) => seen.push(m), clock);
    for (let m = 0; m < 100; m++) wheel.add(m);
    for (let m = 0; m < 50; m++) wheel.delete(m);
    for (let m = 100; m < 150; m++) wheel.add(m);
    assert.equal(wheel.size, 100);
    await clock.advance(1_000);
    assert.deepEqual(seen.sort((a, b) => a - b), Array.from({ length: 100 }, (_, i) => i + 50));
    // Ten slices of ten: the newcomers took the slices the leavers emptied.
    seen.length = 0;
    await clock.advance(100);
    assert.equal(seen.length, 10);
  });

  it('a short interval has fewer slices, each tick at least 100 ms apart; stop ends the visits', async () => {
    const clock = new FakeClock();
    let visits = 0;
    const wheel = new PingWheel<string>(250, () => visits++, clock);
    wheel.add('a');
    wheel.add('b');
    await clock.advance(250);
    // Two slices of 125 ms: each member once.
    assert.equal(visits, 2);
    wheel.stop();
    await clock.advance(10_000);
    assert.equal(visits, 2);
    assert.equal(clock.pending, 0);
  });
});
