// GPT jobs end to end against the real server: two volunteers (the worker runtime on the CPU backend,
// in-memory links) train a small GPT with DiLoCo in an untrusted group. On the generated corpus the
// loss falls and the checkpoint the server stores is the job's GPT under nanoGPT's names, loadable
// into a fresh model; on the fortunes corpus the server serves each member its shard of windows and
// everyone the validation windows, and the validation loss falls.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import { createModel, presetOf } from '@tabfleet/nn';
import { CHECKPOINT_SYNC_HEADER, jobSpecSchema, layoutOf, verifyCheckpoint } from '@tabfleet/protocol';
import { startTestServer, waitFor, type TestServer } from '@tabfleet/server/testing';
import { CpuBackend } from '@tabfleet/tensor';
import { nodeVolunteer } from '@tabfleet/worker/testing';

let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 20_000, barrierTimeoutMs: 60_000, loadTimeoutMs: 30_000 } });
});
after(() => server.stop());

const job = {
  preset: 'gpt' as const, gpt: { layers: 2, heads: 2, width: 32, context: 32 }, dataset: 'text-corpus' as const, tokenizer: 'bytes' as const,
  strategy: 'diloco' as const, H: 8, hyperparameters: { lr: 3e-3, batchSize: 8 }, minWorkers: 2, maxWorkers: 2,
  targetSteps: 48, checkpointEvery: 2, evalEverySteps: 16,
};

test('two volunteers train a GPT on byte-level text: the loss falls and the stored checkpoint is the job\'s GPT', { timeout: 240_000 }, async () => {
  const created = await server.createJob(job);
  const net = new MemoryNetwork();
  const vols = [0, 1].map(() => nodeVolunteer(server.url, net));
  try {
    await waitFor('the job is done', async () => (await server.api(`/api/jobs/${created.id}`)).body.job.state === 'done', 220_000, 250);
    const done = (await server.api(`/api/jobs/${created.id}`)).body.job;
    // Auto pacing (the default): members take the steps their pace fits, so the last sync may pass the target.
    assert.ok(done.step >= 48 && done.step < 48 + 4 * 8 * 2, `step ${done.step}`);
    for (const v of vols) assert.equal(v.runtime.status.lastError, null, `${v.runtime.status.volunteerId}: ${v.runtime.status.lastError}`);
    const points = (await server.api(`/api/jobs/${created.id}/metrics`)).body.points as { loss: number | null; accuracy: number | null }[];
    const losses = points.map((p) => p.loss).filter((l): l is number => l !== null);
    // Bytes of the generated corpus start near ln 256 = 5.5 nats; a few dozen steps learn its letters.
    assert.ok(losses[0] > 4 && losses.at(-1)! < losses[0] - 1, `training loss ${losses[0]} → ${losses.at(-1)}`);

    const res = await fetch(`${server.url}/api/jobs/${created.id}/checkpoint`, { headers: { authorization: 'Bearer test-token' } });
    assert.equal(res.status, 200);
    assert.equal(Number(res.headers.get(CHECKPOINT_SYNC_HEADER)), done.seq);
    const bytes = new Uint8Array(await res.arrayBuffer());
    const spec = jobSpecSchema.parse(job);
    const { params } = verifyCheckpoint(spec, bytes);
    assert.equal(params.length, layoutOf(spec).length);
    const model = createModel(presetOf(spec), new CpuBackend(), 99);
    model.store.loadSafetensors(bytes);
    assert.deepEqual(await model.store.readFlat(), params, 'nanoGPT names and shapes load back into the model');
  } finally {
    for (const v of vols) v.runtime.stop();
    await server.api(`/api/jobs/${created.id}/stop`, { method: 'POST' }).catch(() => {});
  }
});

test('two volunteers train a GPT on the fortunes corpus the server serves with LAMB: their shards and the validation windows come over HTTP, the validation loss falls',
  { timeout: 240_000 }, async () => {
  // LAMB as the inner optimizer here, so the runtime's path runs it (its step is lr·‖w‖ per tensor: a larger lr than AdamW's).
  const created = await server.createJob({ ...job, dataset: 'fortunes', evalEverySteps: 8, hyperparameters: { ...job.hyperparameters, optimizer: 'lamb', lr: 0.02 } });
  const net = new MemoryNetwork();
  const vols = [0, 1].map(() => nodeVolunteer(server.url, net));
  try {
    await waitFor('the job is done', async () => (await server.api(`/api/jobs/${created.id}`)).body.job.state === 'done', 220_000, 250);
    for (const v of vols) assert.equal(v.runtime.status.lastError, null, `${v.runtime.status.volunteerId}: ${v.runtime.status.lastError}`);
    const points = (await server.api(`/api/jobs/${created.id}/metrics`)).body.points as { step: number; loss: number | null; accuracy: number | null }[];
    // Evaluation points carry an accuracy: their loss is the validation loss, over the server's 64 held-out windows.
    const validation = points.filter((p) => p.accuracy !== null).map((p) => p.loss!);
    assert.ok(validation.length >= 3, `${validation.length} evaluations`);
    // English bytes start at ln 256 = 5.5 nats; 48 steps learn at least which bytes are common.
    console.log(`validation loss (nats per byte): ${validation.map((l) => l.toFixed(3)).join(' → ')}`);
    assert.ok(validation[0] > validation.at(-1)! + 0.5 && validation.at(-1)! < 4, `validation loss ${validation.join(' → ')}`);
  } finally {
    for (const v of vols) v.runtime.stop();
    await server.api(`/api/jobs/${created.id}/stop`, { method: 'POST' }).catch(() => {});
  }
});
