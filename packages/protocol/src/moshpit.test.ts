import assert from 'node:assert/strict';
import { test } from 'node:test';
import { moshpitGrid, moshpitGroups, moshpitHouseholdGroups } from './moshpit';
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

test('hierarchical groups: a household (one address) is always in one group, side by side in its ring; the mean is kept and the members agree', () => {
  // 60 members: households of 1 to 4 tabs (the 4-tab ones are split when past the group size of 3), and some without an address.
  const rand = mulberry32(7);
  const address = new Map<string, string | undefined>();
  const members: string[] = [];
  for (let h = 0; members.length < 60; h++) {
    const tabs = 1 + Math.floor(rand() * 4);
    for (let t = 0; t < tabs && members.length < 60; t++) {
      const id = `m${members.length}`;
      members.push(id);
      address.set(id, h % 7 === 0 ? undefined : `10.0.0.${h}`);
    }
  }
  const values = new Map(members.map((m) => [m, rand()]));
  const globalMean = [...values.values()].reduce((a, b) => a + b, 0) / members.length;
  let spread = Infinity;
  for (let round = 0; round < 16; round++) {
    const groups = moshpitHouseholdGroups(members, (m) => address.get(m), round, 3);
    assert.deepEqual(groups.flat().sort(), [...members].sort(), 'a partition');
    assert.deepEqual(moshpitHouseholdGroups(members, (m) => address.get(m), round, 3), groups, 'deterministic');
    for (const g of groups) {
      // Members of one address sit together: the ring crosses each household's uplink once (in and out).
      const seen = new Set<string>();
      g.forEach((m, i) => {
        const a = address.get(m);
        if (a === undefined || a === address.get(g[i - 1] ?? '')) return;
        assert.ok(!seen.has(a), `round ${round}: ${a} is split within its group ${g.join(' ')}`);
        seen.add(a);
      });
      assert.ok(g.length <= 9, 'at most 3 grid points of at most 3 members');
    }
    // Households of up to 3 never split across groups.
    for (const a of new Set(address.values())) {
      if (a === undefined) continue;
      const at = members.filter((m) => address.get(m) === a);
      if (at.length <= 3) assert.equal(new Set(at.map((m) => groups.findIndex((g) => g.includes(m)))).size, 1, `${a} split across groups`);
    }
    for (const g of groups) {
      const mean = g.reduce((a, m) => a + values.get(m)!, 0) / g.length;
      for (const m of g) values.set(m, mean);
    }
    spread = Math.max(...members.map((m) => Math.abs(values.get(m)! - globalMean)));
  }
  const mean = [...values.values()].reduce((a, b) => a + b, 0) / members.length;
  assert.ok(Math.abs(mean - globalMean) < 1e-12, 'averaging over members keeps the global mean');
  // Unequal households weigh their grid points unequally, so agreement is not exact after one pass of
  // the axes as in a full grid of single members; it still contracts: within 1% after 13 syncs here,
  // where the same 60 members without households take 11.
  assert.ok(spread < 0.01 * globalMean, `spread ${spread} after 16 syncs`);
});

test('regional groups: the low axis\'s groups stay inside a region, the high axis mixes them, and a full grid still agrees in one round per axis', () => {
  // 256 members in two regions of 128 (interleaved in the member order), groups of 16: a 16 × 16 grid.
  const members = Array.from({ length: 256 }, (_, i) => i);
  const region = (m: number) => (m % 2 ? 'eu' : 'us');
  const values = members.map((m) => m * 1.0);
  for (let round = 0; round < 4; round++) {
    const groups = moshpitGroups(members, round, 16, 1, region);
    assert.deepEqual(groups.flat().sort((a, b) => a - b), members);
    const regionsPerGroup = groups.map((g) => new Set(g.map(region)).size);
    if (round % 2 === 0) assert.ok(regionsPerGroup.every((n) => n === 1), `round ${round}: axis 0 groups inside one region`);
    else assert.ok(regionsPerGroup.every((n) => n === 2), `round ${round}: axis 1 groups span both regions`);
    if (round < 2) {
      for (const g of groups) {
        const mean = g.reduce((a, m) => a + values[m], 0) / g.length;
        for (const m of g) values[m] = mean;
      }
    }
  }
  assert.ok(values.every((v) => Math.abs(v - 127.5) < 1e-9), 'the exact global mean after one round per axis');
  // Which members of a region share a group changes every d = 2 rounds.
  const key = (r: number) => moshpitGroups(members, r, 16, 1, region).map((g) => [...g].sort((a, b) => a - b).join()).sort().join('|');
  assert.notEqual(key(0), key(2));
  // Unequal regions (100 and 156): each starts a fresh run of 16 cells, so no axis-0 group spans both.
  const uneven = (m: number) => (m < 100 ? 'eu' : 'us');
  const mixed = moshpitGroups(members, 0, 16, 1, uneven).filter((g) => new Set(g.map(uneven)).size > 1);
  assert.equal(mixed.length, 0, `${mixed.length} axis-0 groups span both regions`);
});
