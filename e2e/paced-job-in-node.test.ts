// Paced rounds against the real server: three volunteers (the worker runtime on the CPU backend,
// in-memory links), one slowed 4× (it sleeps beside its compute). In a paced job the server measures
// each member's time per step and gives it the steps that fit the round's budget: the slow one does
// about a quarter of the fast ones' steps, its contribution weighs its share of the samples, every
// member ends each sync with the same model, the worker table shows pace and share, and syncs come
// several times as often as in the same job with fixed H, where every sync waits on the slow member.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import type { WorkerRow } from '@tabfleet/protocol';
import { startTestServer, waitFor, type TestServer } from '@tabfleet/server/testing';
import { nodeVolunteer } from '@tabfleet/worker/testing';

let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 30_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 60_000 } });
});
after(() => server.stop());

const SLOWDOWNS = [1, 1, 4];
const SYNCS = 12;

/** Runs a job with the three volunteers to SYNCS syncs; the mean time between its last commits, and its rounds and workers. */
async function run(pacing: 'fixed' | 'paced') {
  const job = await server.createJob({
    name: pacing, trust: 'trusted', strategy: 'localsgd', H: 8, pacing, hyperparameters: { lr: 0.05, batchSize: 32 },
    minWorkers: 3, maxWorkers: 3, targetSteps: 1_000_000, evalEverySteps: 1_000_000, checkpointEvery: 1_000,
  });
  const net = new MemoryNetwork();
  const vols = SLOWDOWNS.map((slowdown) => nodeVolunteer(server.url, net, { jobId: job.id, slowdown }));
  try {
    await waitFor(`${pacing}: ${SYNCS} syncs`, async () => (await server.api(`/api/jobs/${job.id}`)).body.job.seq >= SYNCS, 240_000, 200);
    const { job: j, workers } = (await server.api(`/api/jobs/${job.id}`)).body as { job: { seq: number; step: number }; workers: WorkerRow[] };
    const rounds = ((await server.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { seq: number; outcome: string; detail: string; endedAt: number }[])
      .filter((r) => r.outcome === 'committed').sort((a, b) => a.seq - b.seq);
    // The first syncs measure the paces: time the later ones.
    const late = rounds.slice(4);
    const intervalMs = (late.at(-1)!.endedAt - late[0].endedAt) / (late.length - 1);
    for (const v of vols) assert.equal(v.runtime.status.lastError, null, `${v.runtime.status.volunteerId}: ${v.runtime.status.lastError}`);
    const byVolunteer = vols.map((v) => workers.find((w) => w.volunteerId === v.runtime.status.volunteerId)!);
    return { job: j, rounds, intervalMs, workers: byVolunteer, vols };
  } finally {
    for (const v of vols) v.runtime.stop();
    await server.api(`/api/jobs/${job.id}/stop`, { method: 'POST' }).catch(() => {});
  }
}

test('a paced job gives each member the steps its pace allows, weighs them by samples, and syncs more often than fixed H', { timeout: 600_000 }, async () => {
  const paced = await run('paced');
  const [fastA, fastB, slow] = paced.workers.map((w) => w.pace!);
  console.log(`paced: ${paced.workers.map((w) => `${w.pace!.msPerStep} ms/step, ${w.pace!.steps} steps, share ${w.pace!.share}`).join('; ')}; a sync every ${paced.intervalMs.toFixed(0)} ms`);
  // The budget is H = 8 steps of the fastest member: the fast ones do about 8, the one 4× slower about 2.
  for (const fast of [fastA, fastB]) assert.ok(fast.steps >= 6 && fast.steps <= 10, `a fast member does ${fast.steps} steps`);
  assert.ok(slow.steps >= 1 && slow.steps <= 3, `the slow member does ${slow.steps} steps`);
  assert.ok(slow.msPerStep! > 2.5 * Math.min(fastA.msPerStep!, fastB.msPerStep!), 'its measured pace is the slow one');
  const shares = fastA.share! + fastB.share! + slow.share!;
  assert.ok(Math.abs(shares - 1) < 1e-9 && slow.share! < 0.25, `shares ${fastA.share}, ${fastB.share}, ${slow.share}`);
  // Weighted by samples and still one model: every sync's members agree on its checksum.
  assert.ok(paced.rounds.every((r) => !/mismatch/.test(r.detail)), paced.rounds.map((r) => r.detail).join('; '));
  const distinct = new Set(paced.vols.map((v) => v.runtime.status.seq));
  assert.ok(distinct.size <= 2, 'members are at most one sync apart');

  const fixed = await run('fixed');
  console.log(`fixed H: a sync every ${fixed.intervalMs.toFixed(0)} ms; paced: every ${paced.intervalMs.toFixed(0)} ms`);
  assert.ok(fixed.workers.every((w) => w.pace === null), 'a fixed job shows no pace');
  // Fixed H waits for 8 steps of the slow member each sync, paced for one (measured here: about 2× as many syncs).
  assert.ok(paced.intervalMs < 0.7 * fixed.intervalMs, `paced ${paced.intervalMs} ms vs fixed ${fixed.intervalMs} ms per sync`);
});
