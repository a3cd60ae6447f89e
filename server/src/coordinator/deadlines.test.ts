// Deadlines follow the job's pace: a multiple of the median recent duration plus a floor, within the cap.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Deadlines } from './deadlines';

test('a bound is 4 × the median plus the floor, at most the cap, and the cap (or a first guess) before any history', () => {
  const d = new Deadlines();
  assert.equal(d.bound('round', 30_000), 30_000);
  assert.equal(d.bound('load', 120_000, 2_000), 5_000, 'a first guess under the floor is raised to it');
  for (const ms of [100, 300, 200]) d.record('round', ms);
  assert.equal(d.bound('round', 30_000), 4 * 200 + 5_000);
  assert.equal(d.bound('round', 3_000), 3_000);
});

test('a configured floor replaces the default one, read when a bound is asked', () => {
  let floor: number | undefined = 30_000;
  const d = new Deadlines(() => floor);
  d.record('round', 200);
  assert.equal(d.bound('round', 60_000), 800 + 30_000);
  assert.equal(d.bound('round', 20_000), 20_000);
  floor = undefined;
  assert.equal(d.bound('round', 60_000), 800 + 5_000);
});
