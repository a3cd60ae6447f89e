import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PeerDistances, RTT_PEERS_KEPT } from './peer-distances';

/** Members r<region>-<i>; links inside a region ~`near` ms, across ~`far` ms. */
function twoRegions(d: PeerDistances, perRegion: number, near: number, far: number, links: number, seed = 1): string[] {
  let x = seed;
  const rand = () => ((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const ids = [0, 1].flatMap((r) => Array.from({ length: perRegion }, (_, i) => `r${r}-${String(i).padStart(3, '0')}`));
  for (let k = 0; k < links; k++) {
    const a = ids[Math.floor(rand() * ids.length)], b = ids[Math.floor(rand() * ids.length)];
    if (a === b) continue;
    const base = a[1] === b[1] ? near : far;
    d.record(a, { [b]: base * (1 + 0.3 * rand()) });
  }
  return ids;
}

test('round trips with a gap split into localities: two regions found from random links, named by their smallest member', () => {
  const d = new PeerDistances();
  const ids = twoRegions(d, 40, 40, 300, 400);
  const near = d.nearThresholdMs()!;
  assert.ok(near > 52 && near < 300, `threshold ${near}`);
  const loc = d.localities(ids, 8);
  assert.equal(loc.size, 80, 'every member is in a locality');
  assert.deepEqual(new Set(loc.values()), new Set(['r0-000', 'r1-000']));
  for (const id of ids) assert.equal(loc.get(id), `${id.slice(0, 2)}-000`, id);
});

test('links all alike are one locality or none; small clusters stay unplaced; members that left are forgotten', () => {
  const alike = new PeerDistances();
  const ids = Array.from({ length: 20 }, (_, i) => `m${i}`);
  for (let i = 0; i < 20; i++) alike.record(ids[i], { [ids[(i + 1) % 20]]: 30 + (i % 5) });
  assert.equal(alike.nearThresholdMs(), null, 'no gap: no cut');
  assert.equal(alike.localities(ids, 4).size, 0);

  // Before enough links are measured, near pairs are smaller than a group: nobody is placed by them.
  const early = new PeerDistances();
  const two = twoRegions(early, 40, 40, 300, 30);
  assert.ok([...new Set(early.localities(two, 8).values())].length <= 2);
  const sizes = new Map<string, number>();
  for (const l of early.localities(two, 8).values()) sizes.set(l, (sizes.get(l) ?? 0) + 1);
  assert.ok([...sizes.values()].every((n) => n >= 8), JSON.stringify([...sizes]));

  const d = new PeerDistances();
  const all = twoRegions(d, 20, 40, 300, 300);
  d.forget('r0-000');
  assert.equal(d.rttMs('r0-000', 'r0-001'), undefined);
  const loc = d.localities(all.filter((m) => m !== 'r0-000'), 4);
  assert.equal(loc.get('r0-005'), 'r0-001');
});

test('each member keeps its newest peers, and the smaller of the two ends\' measurements of a link', () => {
  const d = new PeerDistances();
  d.record('a', { b: 80 });
  d.record('b', { a: 40 });
  assert.equal(d.rttMs('a', 'b'), 40);
  d.record('a', { b: 90 });
  assert.equal(d.rttMs('a', 'b'), 40, 'a link gets no slower than measured');
  for (let i = 0; i < RTT_PEERS_KEPT; i++) d.record('a', { [`p${i}`]: 10 });
  assert.equal(d.rttMs('b', 'a'), 40, 'b still holds its own measurement');
  d.record('a', { a: 1, c: Number.NaN, e: -1 });
  assert.equal(d.rttMs('a', 'a'), undefined);
  assert.equal(d.rttMs('a', 'c'), undefined);
  assert.equal(d.rttMs('a', 'e'), undefined);
});
