// Worker runtimes (the tab's code, CPU backend, in-memory links) train an untrusted job in checked
// Moshpit groups against the real server: each sync the server draws two groups of two, each runs
// the collective's Group (per-part owners, CenteredClip, digests, validators) on the members'
// parameters, and every group commits alone. The job reaches its target with an evaluated
// checkpoint; the members of a group agree after its sync.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import { startTestServer, waitFor, type TestServer } from '@tabfleet/server/testing';
import { nodeVolunteer } from '@tabfleet/worker/testing';

let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 30_000, barrierTimeoutMs: 60_000, loadTimeoutMs: 30_000 } });
});
after(() => server.stop());

test('four worker runtimes train an untrusted job in checked groups of two, regrouped every sync, to its target', { timeout: 300_000 }, async () => {
  const created = await server.createJob({
    dataset: 'synthetic-blobs', preset: 'mlp-fashion', strategy: 'localsgd', H: 4, pacing: 'fixed', hyperparameters: { lr: 0.05, batchSize: 32 },
    minWorkers: 4, maxWorkers: 4, groupSize: 2, targetSteps: 40, checkpointEvery: 2, evalEverySteps: 8,
  });
  assert.equal(created.spec.trust, 'untrusted');
  const net = new MemoryNetwork();
  const vols = [0, 1, 2, 3].map(() => nodeVolunteer(server.url, net));
  const begins: { seq: number; roundId: number; mode: string; members: string[] }[] = [];
  for (const v of vols) v.socket.on('round:begin', (r: { seq: number; roundId: number; mode: string; members: string[] }) => begins.push(r));
  try {
    await waitFor('the job is done', async () => (await server.api(`/api/jobs/${created.id}`)).body.job.state === 'done', 280_000, 200);
    const done = (await server.api(`/api/jobs/${created.id}`)).body.job;
    assert.equal(done.step, 40);
    const rounds = (await server.api(`/api/jobs/${created.id}/rounds`)).body.rounds as { seq: number; mode: string; outcome: string; detail: string }[];
    const committed = rounds.filter((r) => r.outcome === 'committed');
    assert.ok(committed.length >= 10 && committed.every((r) => r.mode === 'group'), JSON.stringify(rounds));
    assert.ok(committed.some((r) => r.detail === '2 of 2 groups committed'), JSON.stringify(committed));
    assert.ok(begins.every((b) => b.mode === 'group' && b.members.length === 2), 'every group round has two members');
    const splits = new Set(committed.map((r) => begins.filter((b) => b.seq === r.seq).map((b) => [...b.members].sort().join('+')).sort().join(' | ')));
    // Three ways to split four in two: the same one 10 syncs running by chance is (1/3)^9.
    assert.ok(splits.size >= 2, `the same groups every sync: ${[...splits].join(', ')}`);
    const metrics = (await server.api(`/api/jobs/${created.id}/metrics`)).body.points as { accuracy: number | null }[];
    assert.ok(metrics.some((p) => p.accuracy !== null && p.accuracy > 0.5), 'an evaluation of a group\'s model was recorded');
    assert.ok(done.latestCheckpoint, 'a checkpoint of a group\'s model was stored');
    for (const v of vols) assert.equal(v.runtime.status.lastError, null, `${v.runtime.status.volunteerId}: ${v.runtime.status.lastError}\n${server.logTail()}`);
  } finally {
    for (const v of vols) v.runtime.stop();
    await server.api(`/api/jobs/${created.id}/stop`, { method: 'POST' }).catch(() => {});
  }
});
