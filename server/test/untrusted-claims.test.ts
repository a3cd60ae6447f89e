// Claims of a single volunteer that used to end or corrupt a job, each through the real server with
// simulated volunteers: a member's step count, a member's accuracy, and a member's checkpoint.
import assert from 'node:assert/strict';
import { after, afterEach, before, test } from 'node:test';
import { CHECKPOINT_SYNC_HEADER, encodeSafetensors, modelDigest, f32Tensor, verifyCheckpoint, type MetricPoint } from '@tabfleet/protocol';
import { checkpointOf, simEvaluation, waitFor, type SimVolunteer } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 10_000, barrierTimeoutMs: 10_000, loadTimeoutMs: 10_000 } });
});
after(() => server.stop());
// Every job a test created stops when it ends, so the tests after it do not share the machine with it.
afterEach(() => server.stopJobs());

const job = async (id: string) => (await server.api(`/api/jobs/${id}`)).body.job;
const refusedTo = (s: SimVolunteer) => s.events.find((e) => e.name === 'job:end')?.payload as { reason: string } | undefined;

test('a member claiming 10,000,000 steps does not end the job: steps are the server count', async () => {
  // Fixed pacing: H steps in every sync (a paced job's first does an eighth of H).
  const created = await server.createJob({ minWorkers: 2, maxWorkers: 2, H: 2, pacing: 'fixed', targetSteps: 1000 });
  const liar = await server.volunteer({ reportStep: () => 10_000_000 });
  const honest = await server.volunteer();
  await liar.request(created.id);
  await honest.request(created.id);
  await waitFor('three syncs', () => honest.committed.length >= 3);
  const j = await job(created.id);
  assert.equal(j.state, 'running', j.endReason);
  assert.equal(j.step, 2 * j.seq, 'H steps per committed sync');
});

test('accuracy needs several evaluators: a non-evaluator is refused and one lying evaluator cannot reach the target', async () => {
  // Every sync is evaluated, by three members chosen at random.
  const created = await server.createJob({ minWorkers: 3, maxWorkers: 3, H: 1, targetSteps: 1000, targetAccuracy: 0.95, checkpointEvery: 1, evalEverySteps: 1 });
  const liar = await server.volunteer({ evaluate: () => ({ accuracy: 0.999, loss: 0.001 }) });
  const sims = [liar, await server.volunteer(), await server.volunteer()];
  for (const s of sims) await s.request(created.id);
  await waitFor('four syncs', () => sims[1].committed.length >= 4);
  // Reproduced: a member that is not an evaluator of the sync claims 0.999.
  const ack = await liar.emit('metrics', { jobId: created.id, seq: 1, checksum: '0123456789abcdef', accuracy: 0.999, loss: 0 });
  assert.equal(!ack.ok && ack.error.code, 'not_member');
  await server.hub.flushed();
  const j = await job(created.id);
  assert.equal(j.state, 'running', `ended: ${j.endReason}`);
  const points = ((await server.api(`/api/jobs/${created.id}/metrics`)).body.points as MetricPoint[]).filter((p) => p.accuracy !== null);
  assert.ok(points.length >= 3);
  for (const p of points) {
    assert.equal(p.accuracy, simEvaluation(p.seq).accuracy, `sync ${p.seq}: the lower median of three, not the liar's 0.999`);
    assert.equal(p.vouchers, 3);
  }
  assert.notEqual(j.latestAccuracy, 0.999);
});

test('a checkpoint that is not the job model is refused, its uploader evicted, and the next sync is checkpointed by another member', async () => {
  const created = await server.createJob({ minWorkers: 2, maxWorkers: 3, H: 1, targetSteps: 1000, checkpointEvery: 2 });
  // The reproduced upload: 120 bytes holding evil.weight = [1e30, -1e30].
  const evil = encodeSafetensors({ 'evil.weight': f32Tensor([2], Float32Array.of(1e30, -1e30)) });
  const liar = await server.volunteer({ checkpoint: () => evil });
  const sims = [liar, await server.volunteer(), await server.volunteer()];
  for (const s of sims) await s.request(created.id);
  await waitFor('the liar uploads and is evicted', () => refusedTo(liar), 20_000);
  assert.match(refusedTo(liar)!.reason, /not the job's model: checkpoint lacks layers\.0\.weight/);
  const lost = (await job(created.id)).seq;
  await waitFor('a verified checkpoint after the refused one', async () => (await job(created.id)).latestCheckpoint?.seq > lost, 20_000);
  const download = await fetch(`${server.url}/api/jobs/${created.id}/checkpoint`, { headers: { authorization: 'Bearer test-token' } });
  const stored = verifyCheckpoint('mlp-fashion', new Uint8Array(await download.arrayBuffer()));
  const seq = Number(download.headers.get(CHECKPOINT_SYNC_HEADER));
  const honest = sims.slice(1).find((s) => s.applied.has(seq))!;
  assert.equal(stored.digest, modelDigest(honest.applied.get(seq)!), 'what is stored is the model the members hold');
  // It may not come straight back under the same identity.
  const again = await liar.request(created.id);
  assert.equal(!again.ok && again.error.code, 'rate_limited');
});

test('a checkpoint in the right layout but with other values is refused: its checksum is not the one the evaluators agree on', async () => {
  const created = await server.createJob({ minWorkers: 2, maxWorkers: 3, H: 1, targetSteps: 1000, checkpointEvery: 2 });
  const liar = await server.volunteer({ checkpoint: (_seq, params) => checkpointOf('mlp-fashion', params.map((x) => x + 1)) });
  const sims = [liar, await server.volunteer(), await server.volunteer()];
  for (const s of sims) await s.request(created.id);
  await waitFor('the liar uploads and is evicted', () => refusedTo(liar), 20_000);
  assert.match(refusedTo(liar)!.reason, /uploaded a model with checksum [0-9a-f]+; the evaluators of sync \d+ agree on [0-9a-f]+/);
  const lost = (await job(created.id)).seq;
  await waitFor('a verified checkpoint after the refused one', async () => (await job(created.id)).latestCheckpoint?.seq > lost, 20_000);
});

test('a joiner that reports a checksum other than the checkpoint it was sent is evicted', async () => {
  const created = await server.createJob({ minWorkers: 2, maxWorkers: 3, H: 1, targetSteps: 1000, checkpointEvery: 1 });
  const sims = [await server.volunteer(), await server.volunteer()];
  for (const s of sims) await s.request(created.id);
  await waitFor('a checkpoint', async () => (await job(created.id)).latestCheckpoint, 20_000);
  const joiner = await server.volunteer({ loadedChecksum: () => 'deadbeefdeadbeef' });
  await joiner.request(created.id);
  await waitFor('the joiner is evicted', () => refusedTo(joiner), 20_000);
  assert.match(refusedTo(joiner)!.reason, /loaded a model with checksum deadbeefdeadbeef; the checkpoint of sync \d+ holds [0-9a-f]{32}/);
  const before = sims[0].committed.length;
  await waitFor('the job goes on', () => sims[0].committed.length > before + 1);
});

test('uploaders are chosen at random, not always the first seat', async () => {
  const created = await server.createJob({ minWorkers: 3, maxWorkers: 3, H: 1, targetSteps: 1000, checkpointEvery: 1 });
  const sims = [await server.volunteer(), await server.volunteer(), await server.volunteer()];
  for (const s of sims) await s.request(created.id);
  await waitFor('twelve checkpointed syncs', () => sims.reduce((n, s) => n + s.uploads.length, 0) >= 12, 20_000);
  // Each of 12 uploads by the same member has probability 3·(1/3)^12 ≈ 6e-6.
  assert.ok(sims.filter((s) => s.uploads.length > 0).length >= 2, sims.map((s) => s.uploads.length).join(','));
});
