// A model past the old 32 MiB ceiling end to end: a GPT of 41 MiB of f32 parameters (three layers
// of width 544 over bytes: many parameters, few FLOPs at a context of 2 and a batch of 1, so the CPU
// backend trains it) is accepted, its volunteer (the worker runtime, CPU backend) uploads its
// checkpoint over HTTP in chunks, the server verifies it against the evaluators' digest and stores
// it, a restart on the same data directory keeps it, and a joiner loads it (its digest checked by the
// server before it is admitted). Before, the job was refused: models travelled through the server
// within 32 MiB, and a server whose limit is that still refuses it.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import { CHECKPOINT_SHA256_HEADER, CHECKPOINT_SYNC_HEADER, flatLengthOf, jobSpecSchema, LIMITS, modelDigest, verifyCheckpoint } from '@tabfleet/protocol';
import { startTestServer, waitFor, type TestServer } from '@tabfleet/server/testing';
import { nodeVolunteer } from '@tabfleet/worker/testing';
import { createHash } from 'node:crypto';

const dataDir = mkdtempSync(join(tmpdir(), 'tabfleet-big-model-'));
const OPTIONS = { dataDir, timing: { roundTimeoutMs: 120_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 120_000 } };
let server: TestServer | null = null;
after(async () => {
  await server?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const job = {
  preset: 'gpt' as const, gpt: { layers: 3, heads: 4, width: 544, context: 2 }, dataset: 'fortunes' as const, tokenizer: 'bytes' as const,
  strategy: 'localsgd' as const, H: 1, hyperparameters: { lr: 1e-3, batchSize: 1 }, minWorkers: 1, maxWorkers: 2,
  targetSteps: 100_000, checkpointEvery: 1, evalEverySteps: 100_000,
};
const MODEL_BYTES = flatLengthOf(jobSpecSchema.parse(job)) * 4;

const auth = { authorization: 'Bearer test-token' };

test('a 41 MiB model\'s checkpoint uploads over HTTP, is verified, survives a restart and loads in a joiner', { timeout: 900_000 }, async () => {
  assert.ok(MODEL_BYTES > 40 * 2 ** 20 && MODEL_BYTES > LIMITS.maxModelBytes, `${MODEL_BYTES} bytes of f32`);
  server = await startTestServer(OPTIONS);
  // At the old ceiling the job is refused (on the code before, its schema refused it everywhere).
  const old = await startTestServer({ maxModelBytes: LIMITS.maxModelBytes });
  try {
    const refused = await old.api('/api/jobs', { method: 'POST', json: job });
    assert.equal(refused.status, 400);
    assert.match(refused.body.error.message, /this server takes models of at most 32\.0 MiB/);
  } finally {
    await old.stop();
  }

  const created = await server.createJob(job);
  const uploader = nodeVolunteer(server.url, new MemoryNetwork());
  let stored: { seq: number; sha256: string; bytes: number };
  try {
    stored = await waitFor('a checkpoint is stored', async () => (await server!.api(`/api/jobs/${created.id}`)).body.job.latestCheckpoint, 600_000, 500);
    assert.equal(uploader.runtime.status.lastError, null, String(uploader.runtime.status.lastError));
  } finally {
    uploader.runtime.stop();
  }
  assert.ok(stored.bytes > MODEL_BYTES, `a checkpoint of ${stored.bytes} bytes`);
  // Its member gone (an upload it had under way is given up), the job's latest checkpoint is what the restart must keep.
  await waitFor('the uploader has left', async () => (await server!.api(`/api/jobs/${created.id}`)).body.job.workers === 0, 60_000, 250);
  await server.hub.flushed();
  stored = (await server.api(`/api/jobs/${created.id}`)).body.job.latestCheckpoint;

  // The restart: the server closes and starts again on the same data directory.
  await server.stop();
  server = await startTestServer(OPTIONS);
  const res = await fetch(`${server.url}/api/jobs/${created.id}/checkpoint`, { headers: auth });
  assert.equal(res.status, 200);
  assert.equal(Number(res.headers.get(CHECKPOINT_SYNC_HEADER)), stored.seq);
  const bytes = new Uint8Array(await res.arrayBuffer());
  assert.equal(createHash('sha256').update(bytes).digest('hex'), stored.sha256);
  assert.equal(res.headers.get(CHECKPOINT_SHA256_HEADER), stored.sha256);
  const digest = modelDigest(verifyCheckpoint(jobSpecSchema.parse(job), bytes).params);

  // A joiner loads it (what it loaded is recorded), and the server admits it only when the digest it
  // reports is the checkpoint's: it then commits syncs of its own.
  const lines: string[] = [];
  const joiner = nodeVolunteer(server.url, new MemoryNetwork(), { log: (l) => lines.push(l) });
  const loaded: { url: string | null; digest: string }[] = [];
  const loadModel = joiner.engine.loadModel.bind(joiner.engine);
  joiner.engine.loadModel = async (url, step) => {
    const r = await loadModel(url, step);
    loaded.push({ url, digest: r.digest });
    return r;
  };
  try {
    await waitFor('the joiner is admitted and commits a sync', () => joiner.runtime.status.seq > stored.seq, 300_000, 250).catch((e: Error) => {
      throw new Error(`${e.message}\njoiner: ${JSON.stringify(joiner.runtime.status)}\n${lines.join('\n')}\nserver:\n${server!.logTail(40)}`);
    });
    assert.equal(loaded.length, 1);
    assert.match(loaded[0].url!, new RegExp(`/api/jobs/${created.id}/checkpoints/${stored.seq}\\?ticket=`));
    assert.equal(loaded[0].digest, digest, 'the joiner holds the checkpoint\'s model');
    assert.equal(joiner.runtime.status.lastError, null, String(joiner.runtime.status.lastError));
  } finally {
    joiner.runtime.stop();
    await server.api(`/api/jobs/${created.id}/stop`, { method: 'POST' }).catch(() => {});
  }
});
