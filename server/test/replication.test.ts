// Redundant recompute through the real server with simulated volunteers: the server gives a member's
// next unit of work to a second member, the two deltas are compared, agreement confirms both; a member
// with faulty hardware (or one that lies about its work) is outvoted by a third and loses reputation.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ReplicaTask, WorkerRow } from '@tabfleet/protocol';
import { waitFor, type SimOptions, type SimVolunteer } from '../src/testing/sim-volunteer';
import { testServerPerFile } from './group-jobs';

// A unit at every sync where none is open. At the default rates the honest members leave probation
// within a few syncs (group validation confirms them), and then a unit holding the faulty member came
// once in ~40 syncs: CI once waited 90 s for one.
const testServer = testServerPerFile({ replicationRate: { probation: 1, trusted: 1 } });

async function job(members: Partial<SimOptions>[], spec: object = {}) {
  const created = await testServer().createJob({ minWorkers: members.length, maxWorkers: members.length, H: 2, targetSteps: 1000, ...spec });
  const sims: SimVolunteer[] = [];
  for (const o of members) sims.push(await testServer().volunteer(o));
  for (const s of sims) await s.request(created.id);
  return { id: created.id, sims };
}
const counter = async (name: string) => Number(new RegExp(`^tabfleet_${name}_total (\\d+)$`, 'm').exec((await testServer().api('/metrics')).text)?.[1] ?? 0);
const tasksOf = (s: SimVolunteer) => s.events.filter((e) => e.name === 'work:replicate').map((e) => e.payload as ReplicaTask);
const workersOf = async (id: string): Promise<WorkerRow[]> => (await testServer().api(`/api/jobs/${id}`)).body.workers;

test('honest members: units are replicated, the deltas agree, and both members are confirmed', async () => {
  const agreedBefore = await counter('replicas_agreed');
  const { id, sims } = await job([{}, {}, {}]);
  await waitFor('three agreements', async () => (await counter('replicas_agreed')) - agreedBefore >= 3, 60_000);
  const tasks = sims.flatMap(tasksOf);
  const units = new Set(tasks.map((t) => t.unit.unitId));
  for (const unitId of units) {
    const roles = tasks.filter((t) => t.unit.unitId === unitId).map((t) => t.role).sort();
    assert.deepEqual(roles.slice(0, 2), ['original', 'replica'], `unit ${unitId}`);
  }
  // A unit is the work its original was given for the next sync: the job's H, or paced (auto, the
  // default), its planned steps, so the unit does not move the job's step count off its plan.
  for (const s of sims) {
    for (const t of tasksOf(s).filter((x) => x.role === 'original')) {
      const commit = s.events.find((e) => e.name === 'round:commit' && (e.payload as { seq: number }).seq === t.unit.seq)?.payload as { steps?: Record<string, number> } | undefined;
      assert.equal(t.unit.steps, commit?.steps?.[s.volunteerId] ?? 2, `unit ${t.unit.unitId}`);
    }
  }
  assert.equal(await counter('replicas_disagreed'), 0);
  const rows = await workersOf(id);
  assert.ok(rows.every((w) => w.reputation && w.reputation.faults === 0));
  assert.ok(rows.reduce((n, w) => n + (w.reputation?.verified ?? 0), 0) >= 6, JSON.stringify(rows.map((w) => w.reputation)));
  for (const s of sims) assert.deepEqual(s.errors, []);
});

test('a member whose hardware computes wrongly is outvoted by a third member and loses reputation; the honest ones do not', async () => {
  const faulty = (honest: Float32Array) => honest.map((v, i) => v * 1.5 + (i % 7) * 1e-3);
  // A long honest record first: one fault must still put it back on probation.
  await testServer().store.addReputation('long-honest-record-1', { verified: 100 });
  const { id, sims } = await job([{}, {}, {}, { replica: faulty, clientId: 'long-honest-record-1' }]);
  const bad = sims[3];
  await waitFor('its fault is on record', async () => (await workersOf(id)).find((w) => w.volunteerId === bad.volunteerId)?.reputation?.faults === 1, 90_000, 100);
  const rows = await workersOf(id);
  const mine = rows.find((w) => w.volunteerId === bad.volunteerId)!;
  assert.equal(mine.reputation!.probation, true, 'a fault puts it back on probation');
  for (const w of rows.filter((x) => x.volunteerId !== bad.volunteerId)) assert.equal(w.reputation?.faults, 0, `${w.volunteerId} is honest`);
  assert.ok((await counter('replicas_disagreed')) >= 1);
  const tieBreak = sims.flatMap(tasksOf).filter((t) => t.role === 'replica');
  assert.ok(new Set(tieBreak.map((t) => t.unit.unitId)).size < tieBreak.length, 'a unit was given to a third member');
});

test('a DDP job has no replayable units: nothing is replicated', async () => {
  const { sims } = await job([{}, {}], { strategy: 'ddp', H: 1, hyperparameters: { lr: 0.1, batchSize: 32 } });
  await waitFor('five syncs', () => sims[0].committed.length >= 5, 30_000);
  assert.deepEqual(sims.flatMap(tasksOf), []);
});
