// The fake clock other packages' timing tests stand on: timers in due order (ties in scheduling
// order), timers scheduled by timers, promises settled between, cancels, busy time, and run().
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { realClock, serverClock, sleepOn } from './clock';
import { FakeClock } from './testing';

test('advance runs due timers in time order, ties in scheduling order, and those that timers schedule', async () => {
  const c = new FakeClock(0);
  const seen: string[] = [];
  c.after(30, () => seen.push(`c@${c.now()}`));
  c.after(10, () => {
    seen.push(`a@${c.now()}`);
    c.after(5, () => seen.push(`a+5@${c.now()}`));
    c.after(0, () => seen.push(`a+0@${c.now()}`));
  });
  c.after(10, () => seen.push(`b@${c.now()}`));
  const cancel = c.after(20, () => seen.push('cancelled'));
  cancel();
  c.after(31, () => seen.push('later'));
  await c.advance(30);
  assert.deepEqual(seen, ['a@10', 'b@10', 'a+0@10', 'a+5@15', 'c@30']);
  assert.equal(c.now(), 30);
  assert.equal(c.pending, 1);
});

test('promises settle between timers: an await chain after a sleep schedules its next sleep in time', async () => {
  const c = new FakeClock(0);
  const at: number[] = [];
  const loop = (async () => {
    for (let i = 0; i < 3; i++) {
      await sleepOn(c, 100);
      await Promise.resolve();
      at.push(c.now());
    }
  })();
  await c.advance(250);
  assert.deepEqual(at, [100, 200]);
  await c.advance(50);
  await loop;
  assert.deepEqual(at, [100, 200, 300]);
});

test('spend moves time with nothing run; the timers it passed fire late, at the next advance', async () => {
  const c = new FakeClock(0);
  const fired: number[] = [];
  c.after(10, () => fired.push(c.now()));
  c.spend(25);
  assert.deepEqual(fired, []);
  await c.advance(0);
  assert.deepEqual(fired, [25]);
});

test('run jumps to each timer until the promise settles, and rejects when nothing could settle it', async () => {
  const c = new FakeClock(0);
  const p = sleepOn(c, 5_000).then(() => sleepOn(c, 7)).then(() => c.now());
  assert.equal(await c.run(p), 5_007);
  await assert.rejects(c.run(new Promise(() => {})), /no timer left/);
  c.after(10_000, () => {});
  await assert.rejects(c.run(new Promise(() => {}), 1_000), /after 1000 ms of fake time/);
});

test('the real clocks read the wall clock and run their timers', async () => {
  for (const clock of [realClock, serverClock]) {
    assert.ok(Math.abs(clock.now() - Date.now()) < 1_000);
    // An unref'd timer alone would let the event loop end before it fires: a ref'd one keeps it up.
    const keepAlive = setTimeout(() => {}, 1_000);
    let ran = false;
    await new Promise<void>((r) => clock.after(1, () => r(void (ran = true))));
    assert.ok(ran);
    let cancelled = true;
    clock.after(1, () => (cancelled = false))();
    await new Promise((r) => setTimeout(r, 5));
    assert.ok(cancelled);
    clearTimeout(keepAlive);
  }
});
