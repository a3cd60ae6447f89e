import assert from 'node:assert/strict';
import { test } from 'node:test';
import { moshpitGrid, moshpitGroups } from './moshpit';
import { mulberry32 } from './random';

/** Each group replaces its members' values by their mean; returns the largest distance from the global mean. */
function averageRound(values: number[], round: number, size: number): number {
  for (const g of moshpitGroups(values.map((_, i) => i), round, size)) {
    const mean = g.reduce((a, i) => a + values[i], 0) / g.length;
    for (const i of g) values[i] = mean;
  }
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  return Math.max(...values.map((v) => Math.abs(v - mean)));
}

test('the grid: sides of the group size, then the rest', () => {
  assert.deepEqual(moshpitGrid(32, 8), [8, 4]);
  assert.deepEqual(moshpitGrid(10_000, 16), [16, 16, 16, 3]);
  assert.deepEqual(moshpitGrid(5, 8), [5]);
  assert.throws(() => moshpitGrid(5, 1), /group size/);
});

test('groups partition the members, are at most the group size, and are the same for everyone who computes them', () => {
  const members = Array.from({ length: 100 }, (_, i) => `m${i}`);
  for (let round = 0; round < 6; round++) {
    const groups = moshpitGroups(members, round, 8);
    assert.deepEqual(groups.flat().sort(), [...members].sort());
    assert.ok(groups.every((g) => g.length >= 1 && g.length <= 8));
    assert.deepEqual(moshpitGroups(members, round, 8), groups);
  }
  assert.notDeepEqual(moshpitGroups(members, 0, 8), moshpitGroups(members, 1, 8), 'the groups change between rounds');
});

test('a full grid reaches the exact global average in one round per axis; 10,000 members in groups of 16 within 1% in a few more', () => {
  const rand = mulberry32(4);
  const full = Array.from({ length: 32 }, () => rand());
  const spread0 = averageRound([...full], 0, 8);
  assert.ok(spread0 > 1e-3, 'one axis alone does not average everything');
  const values = [...full];
  averageRound(values, 0, 8);
  assert.ok(averageRound(values, 1, 8) < 1e-12, '[8, 4]: two rounds give the mean');
  // An unfilled grid (12,288 cells for 10,000): the spread still falls by a large factor per round.
  const big = Array.from({ length: 10_000 }, () => rand());
  const start = Math.max(...big.map((v) => Math.abs(v - 0.5)));
  let rounds = 0;
  while (averageRound(big, rounds, 16) > 0.01 * start) rounds++;
  rounds++;
  assert.ok(rounds <= 2 * Math.log2(10_000 / 16), `${rounds} rounds to 1% (goal ≤ 2·log2(N/group) = ${(2 * Math.log2(10_000 / 16)).toFixed(1)})`);
});
