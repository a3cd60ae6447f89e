// Untrusted Moshpit groups compose with paced rounds (issue 37): four worker runtimes (CPU backend,
// in-memory links), one slowed 4×, train an untrusted paced job in checked groups of two against the
// real server. Each sync the server hands every member its step count; each group weighs its members
// by them (capped at the group's median, so nobody buys weight by claiming steps), through the
// collective's robust Group, and the server's checks (digests, validators) recompute the same
// weighted rule: a group commits only when both agree. The slowed member takes fewer steps, and the
// job reaches its target.
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

type Begin = { seq: number; mode: string; members: string[]; steps?: Record<string, number> };

test('four runtimes, one slowed 4×, train an untrusted paced job in checked groups of two, weighted by their steps', { timeout: 300_000 }, async () => {
  const created = await server.createJob({
    dataset: 'synthetic-blobs', preset: 'mlp-fashion', strategy: 'localsgd', H: 4, pacing: 'paced', hyperparameters: { lr: 0.05, batchSize: 32 },
    minWorkers: 4, maxWorkers: 4, groupSize: 2, targetSteps: 160, checkpointEvery: 2, evalEverySteps: 32,
    // A budget of its own: the default is 19 exchanges, and a group round with validation on a machine
    // busy with another job took so long that every member, the slowed one too, hit the step ceiling
    // (8 × H): 58.8 steps a sync (two begins counted per group) for it against the others' median 58.
    roundBudgetMs: 2_000,
  });
  assert.equal(created.spec.trust, 'untrusted');
  const net = new MemoryNetwork();
  const vols = [1, 1, 1, 4].map((slowdown) => nodeVolunteer(server.url, net, { slowdown }));
  const begins: Begin[] = [];
  for (const v of vols) v.socket.on('round:begin', (r: Begin) => begins.push(r));
  try {
    await waitFor('the job is done', async () => (await server.api(`/api/jobs/${created.id}`)).body.job.state === 'done', 280_000, 200);
    const rounds = (await server.api(`/api/jobs/${created.id}/rounds`)).body.rounds as { seq: number; mode: string; outcome: string; detail: string }[];
    const committed = rounds.filter((r) => r.outcome === 'committed');
    assert.ok(committed.length >= 4 && committed.every((r) => r.mode === 'group'), JSON.stringify(rounds));
    assert.ok(committed.some((r) => r.detail === '2 of 2 groups committed'), JSON.stringify(committed));
    // Every group round carries its members' step counts (the weights), and only theirs.
    assert.ok(begins.length > 0 && begins.every((b) => b.steps && Object.keys(b.steps).sort().join() === [...b.members].sort().join()), JSON.stringify(begins.slice(0, 4)));
    const ids = vols.map((v) => v.runtime.status.volunteerId!);
    // From sync 3 on: the first syncs' steps come before the server has measured anyone's pace.
    const stepsOf = (id: string) => {
      const mine = begins.filter((b) => b.seq >= 3 && b.steps?.[id] !== undefined);
      return mine.reduce((a, b) => a + b.steps![id], 0) / new Set(mine.map((b) => b.seq)).size;
    };
    const [fast1, fast2, fast3, slow] = ids.map(stepsOf);
    const fastMedian = [fast1, fast2, fast3].sort((a, b) => a - b)[1];
    console.log(`steps a sync: ${[fast1, fast2, fast3].map((s) => s.toFixed(1)).join(', ')} (unslowed), ${slow.toFixed(1)} (slowed 4×)`);
    assert.ok(slow < fastMedian, `the slowed member took ${slow} steps a sync, the others' median ${fastMedian}`);
    const done = (await server.api(`/api/jobs/${created.id}`)).body.job;
    assert.ok(done.step >= 160 && done.latestCheckpoint, JSON.stringify(done));
    for (const v of vols) assert.equal(v.runtime.status.lastError, null, `${v.runtime.status.volunteerId}: ${v.runtime.status.lastError}\n${server.logTail()}`);
  } finally {
    for (const v of vols) v.runtime.stop();
    await server.api(`/api/jobs/${created.id}/stop`, { method: 'POST' }).catch(() => {});
  }
});
