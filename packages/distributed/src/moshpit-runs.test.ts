// Grouped (Moshpit) syncs in the in-process runner: members average their LocalSGD parameters in
// small groups that change every sync, over real Rings on the in-memory transport; a member that
// leaves mid-sync fails only its own group's ring, which re-runs without it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import { gaussianBlobs } from '@tabfleet/data';
import { CpuBackend } from '@tabfleet/tensor';
import { holdOutTail } from './convergence';
import { runSyncs, startWorkers, type RunOptions } from './simulate';
import { mlpWorkers, type JobSetup } from './workers';

const blobs = holdOutTail(gaussianBlobs(1000, 784, 10, 9), 200);
const job: JobSetup = {
  workers: 8, data: { train: blobs.head, test: blobs.tail }, batchSize: 8, seed: 3, optimizer: { kind: 'sgd', lr: 0.05, momentum: 0.9, nesterov: true },
  strategy: { strategy: 'localsgd', H: 2, compression: 'none', outerLr: 1, outerMomentum: 0 },
};

async function run(opts: Omit<RunOptions, 'syncs'>, syncs: number, setup: Partial<JobSetup> = {}) {
  const workers = mlpWorkers(new CpuBackend(), { ...job, ...setup });
  await startWorkers(workers);
  const reports = await runSyncs(workers, new MemoryNetwork(), { syncs, ...opts });
  return { workers, reports };
}

test('one group as large as the job gives exactly the ring\'s parameters (members average parameters, not deltas)', async () => {
  const ring = await run({}, 3);
  const grouped = await run({ groups: { size: 8 } }, 3);
  assert.deepEqual(grouped.reports.map((r) => r.groups!.length), [1, 1, 1]);
  // The same up to rounding: the ring averages deltas from one base, the group parameters.
  const [a, b] = [await grouped.workers[5].engine.readParams(), await ring.workers[5].engine.readParams()];
  const worst = a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
  assert.ok(worst < 1e-6, `differs by up to ${worst}`);
});

test('groups of 4 change every sync, keep the members apart between rotations, and a departure re-runs only its own group', async () => {
  const { reports } = await run({ groups: { size: 4 }, consensus: true, departures: { 3: ['w5'] }, deadlineMs: 1_500 }, 5);
  // 8 members: a 4 × 2 grid; groups of 4 along one axis, then of 2 along the other.
  assert.deepEqual(reports[0].groups!.map((g) => g.length), [4, 4]);
  assert.deepEqual(reports[1].groups!.map((g) => g.length).sort(), [2, 2, 2, 2]);
  // Two groups after the first sync: two models (the runner checked that each group's members agree).
  // That the rotation reaches the global mean is protocol's moshpit.test.ts; here local steps move
  // every member between syncs, so the distance stays of the order of one sync's drift.
  assert.ok(reports.every((r) => r.consensus! > 0 && r.consensus! < 0.2), reports.map((r) => r.consensus).join(' '));
  assert.notDeepEqual(reports[0].groups, reports[2].groups, 'placed anew every two syncs (one per axis)');
  const third = reports[2];
  const withLeaver = third.groups!.findIndex((g) => g.includes('w5'));
  third.groupAttempts!.forEach((a, i) => assert.equal(a, i === withLeaver ? 2 : 1, `group ${i}: ${third.groups![i].join(' ')}`));
  assert.ok(!third.ids.includes('w5') && reports.slice(3).every((r) => !r.groups!.flat().includes('w5')), 'gone from its sync on');
});

test('grouped runs are LocalSGD: other strategies and departures without groups are refused', async () => {
  await assert.rejects(run({ groups: { size: 4 } }, 1, { strategy: { ...job.strategy, strategy: 'diloco' } }), /LocalSGD/);
  await assert.rejects(run({ departures: { 1: ['w1'] } }, 1), /grouped runs/);
});
