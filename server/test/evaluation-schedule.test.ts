// The test set is read on the job's evaluation schedule only (evalEverySteps from evalFromStep, and
// the last sync), through the real server with simulated volunteers. A checkpoint off that schedule
// still has evaluators, who report the model's checksum alone (round:begin says `checksumOnly`): its
// upload is verified by them, an evaluator that reports another model is still outvoted, and an
// accuracy sent anyway is not recorded. Before, every checkpoint was evaluated on the whole test set
// (checkpointEvery 10 at H 1 read it ten times as often as evalEverySteps 100 asked).
import assert from 'node:assert/strict';
import { after, afterEach, before, test } from 'node:test';
import type { MetricPoint, RoundBegin } from '@tabfleet/protocol';
import { waitFor, type SimOptions, type SimVolunteer } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 10_000, barrierTimeoutMs: 10_000, loadTimeoutMs: 10_000 } });
});
after(() => server.stop());
afterEach(() => server.stopJobs());

/** H 1: a checkpoint every 2 syncs (steps 2, 4, …), the test set read at steps 8 and 12 (evalEverySteps 4 from step 8) and at the end, 14. */
const SPEC = { trust: 'trusted', pacing: 'fixed', minWorkers: 3, maxWorkers: 3, H: 1, targetSteps: 14, checkpointEvery: 2, evalEverySteps: 4, evalFromStep: 8 } as const;

async function runJob(opts: Partial<SimOptions>[] = [{}, {}, {}], spec: object = {}) {
  const sims: SimVolunteer[] = [];
  for (const o of opts) sims.push(await server.volunteer(o));
  const job = await server.createJob({ ...SPEC, ...spec });
  for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
  await waitFor('the job is done', async () => (await server.api(`/api/jobs/${job.id}`)).body.job.state === 'done', 60_000);
  await server.hub.flushed();
  const points = (await server.api(`/api/jobs/${job.id}/metrics`)).body.points as MetricPoint[];
  const evaluated = points.filter((p) => typeof p.vouchers === 'number');
  const begins = sims.flatMap((s) => s.events.filter((e) => e.name === 'round:begin').map((e) => e.payload as RoundBegin));
  const bySeq = new Map(begins.map((b) => [b.seq, b]));
  return { sims, job: (await server.api(`/api/jobs/${job.id}`)).body.job, evaluated, begins: [...bySeq.values()].sort((a, b) => a.seq - b.seq) };
}

test('the test set is read at evalEverySteps from evalFromStep and at the end; the other checkpoints are checked by checksum alone', async () => {
  const lost = server.metrics.get('checkpoints_lost');
  // Every member reports an accuracy whenever it is an evaluator: the checksum-only ones must be dropped.
  const { sims, job, evaluated, begins } = await runJob();
  const steps = evaluated.map((p) => p.step);
  console.log(`evaluated at steps ${steps.join(', ')}; checksum-only syncs ${begins.filter((b) => b.checksumOnly).map((b) => b.seq).join(', ')}; `
    + `uploads at syncs ${sims.flatMap((s) => s.uploads).sort((a, b) => a - b).join(', ')}`);
  assert.deepEqual(steps, [8, 12, 14], JSON.stringify(evaluated));
  assert.ok(evaluated.every((p) => p.accuracy !== null && p.vouchers === 3), JSON.stringify(evaluated));
  // Checkpoints every 2 syncs: off the schedule they ask for checksums only, on it for an evaluation.
  for (const b of begins) {
    const checkpoint = b.seq % 2 === 0 || b.seq === 14;
    assert.equal(b.uploader !== null, checkpoint, `sync ${b.seq} uploader`);
    assert.equal(b.evaluators.length, checkpoint || b.seq === 8 || b.seq === 12 ? 3 : 0, `sync ${b.seq} evaluators`);
    assert.equal(b.checksumOnly === true, checkpoint && ![8, 12, 14].includes(b.seq), `sync ${b.seq} checksumOnly`);
  }
  // Each checkpoint was verified against its evaluators' checksums and stored.
  assert.deepEqual(sims.flatMap((s) => s.uploads).sort((a, b) => a - b), [2, 4, 6, 8, 10, 12, 14]);
  assert.equal(job.latestCheckpoint?.seq, 14);
  assert.equal(server.metrics.get('checkpoints_lost'), lost);
});

test('an evaluator that reports another model at a checksum-only checkpoint is outvoted and removed', async () => {
  const liar: Partial<SimOptions> = { evaluate: (seq) => ({ accuracy: 0.99, loss: 0.01, checksum: `badc0de${seq.toString(16).padStart(9, '0')}` }) };
  // Two are enough to go on once it is removed.
  const { sims, job, evaluated } = await runJob([{}, {}, liar], { minWorkers: 2 });
  console.log(`the liar: ${sims[2].endings.join(' | ')}; job ${job.state} at sync ${job.seq}`);
  assert.match(sims[2].endings.join(' | '), /evaluated a model \(sync 2\) other than the one its evaluators agree on/);
  assert.ok(evaluated.every((p) => p.accuracy !== 0.99), JSON.stringify(evaluated));
});
