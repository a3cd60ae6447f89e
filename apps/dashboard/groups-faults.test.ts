import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { WorkerRow } from '@tabfleet/protocol';
import { faultRows, latestGroups } from './groups-faults';

const row = (id: string, patch: Partial<WorkerRow> = {}): WorkerRow => ({
  volunteerId: id, jobId: 'j', state: 'training', hidden: false, contributor: `volunteer ${id}`, syncs: 3, adapter: 'a', backend: 'webgpu', step: 24,
  samplesPerSec: 100, bytesSent: 0, bytesReceived: 0, downloadedBytes: null, lastRound: null, lastRoundMs: null, lastRoundMode: 'group', admitted: true, faults: 0,
  reputation: null, pace: null, links: null, group: null, lastFault: null, leftReason: null, ...patch,
});

test('the latest sync\'s groups, by index, and the members in none of them', () => {
  const workers = [
    row('a', { group: { seq: 5, index: 1, of: 2 } }), row('b', { group: { seq: 5, index: 0, of: 2 } }), row('c', { group: { seq: 5, index: 1, of: 2 } }),
    // Its group failed at sync 5: its last committed group is sync 4's.
    row('d', { group: { seq: 4, index: 0, of: 2 } }),
    row('e', { state: 'left', group: null, faults: 1 }),
  ];
  const g = latestGroups(workers)!;
  assert.equal(g.seq, 5);
  assert.equal(g.of, 2);
  assert.deepEqual(g.groups.map((x) => [x.index, x.members.map((m) => m.volunteerId)]), [[0, ['b']], [1, ['a', 'c']]]);
  assert.deepEqual(g.outside.map((m) => m.volunteerId), ['d']);
});

test('a job without Moshpit groups has no groups to show', () => {
  assert.equal(latestGroups([row('a'), row('b')]), null);
  assert.equal(latestGroups([]), null);
});

test('faults: only workers with one on record, most first, with the last reason and whether they are still members', () => {
  const workers = [
    row('a'), row('b', { faults: 1, lastFault: 'missed the deadline of round 3' }),
    row('c', { state: 'left', faults: 2, lastFault: 'round 9: digests disagree', leftReason: 'round 9: digests disagree' }),
    row('d', { faults: null }),
  ];
  assert.deepEqual(faultRows(workers), [
    { volunteerId: 'c', contributor: 'volunteer c', faults: 2, lastFault: 'round 9: digests disagree', member: false, leftReason: 'round 9: digests disagree' },
    { volunteerId: 'b', contributor: 'volunteer b', faults: 1, lastFault: 'missed the deadline of round 3', member: true, leftReason: null },
  ]);
});
