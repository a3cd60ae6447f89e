// What a checkpoint upload over HTTP may not do. A file whose parameters, or strategy state, are not
// the model the sync's evaluators agree on (the wrong digest) is not stored and its uploader is
// evicted; a file that is not the job's model at all is refused at its last chunk; an upload over what
// the job's checkpoint can take is refused when asked for, changing nothing; and a job whose model is
// over the server's limit is refused at creation.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { flatLengthOf, jobSpecSchema, maxCheckpointBytes } from '@tabfleet/protocol';
import { checkpointOf, waitFor, type SimVolunteer } from '../src/testing/sim-volunteer';
import { BASE_JOB, startTestServer, type TestServer } from '../src/testing/test-server';
import { endReason } from './group-jobs';
import { beginUpload, incomingFiles, putChunk, uploaderOfSyncOne } from './checkpoint-upload-jobs';

const MODEL_BYTES = flatLengthOf(jobSpecSchema.parse(BASE_JOB)) * 4;
let server: TestServer;
before(async () => {
  // The limit holds the job's f32 parameters; its checkpoints may be larger (a safetensors header, the
  // strategy state a joiner needs: DiLoCo's outer momentum is as long as the parameters).
  server = await startTestServer({ maxModelBytes: MODEL_BYTES + 4096, timing: { roundTimeoutMs: 30_000, barrierTimeoutMs: 30_000, loadTimeoutMs: 60_000 } });
});
after(() => server.stop());

async function uploadWhole(file: Uint8Array, uploader: Awaited<ReturnType<typeof uploaderOfSyncOne>>['uploader'], jobId: string) {
  const ack = await beginUpload(uploader, jobId, file.byteLength);
  assert.equal(ack.ok, true, JSON.stringify(ack));
  const { url, token } = ack as unknown as { url: string; token: string };
  return putChunk(url, token, file, 0, file.byteLength);
}

/** The upload's model is not the agreed one: its uploader is evicted, nothing is stored, the other member trains on. */
async function refusedForIntegrity(jobId: string, uploader: SimVolunteer, other: SimVolunteer): Promise<void> {
  await waitFor('the uploader is evicted', () => endReason(uploader), 10_000);
  assert.match(endReason(uploader)!, /uploaded a model with checksum [0-9a-f]+; the evaluators of sync 1 agree on [0-9a-f]+/);
  assert.equal(await server.store.latestCheckpoint(jobId), null, 'no checkpoint of sync 1');
  assert.deepEqual(incomingFiles(server), [], 'the refused file is deleted');
  assert.equal(endReason(other), undefined, 'the other member trains on');
  await server.stopJobs();
}

test('a checkpoint whose parameters are not the model the evaluators agree on is not stored, and its uploader is evicted', { timeout: 60_000 }, async () => {
  const { jobId, spec, uploader, other, model } = await uploaderOfSyncOne(server);
  const forged = model.slice();
  forged[0] += 1;
  const reply = await uploadWhole(checkpointOf(spec, forged), uploader, jobId);
  // It is the job's model in shape: taken, then held against the agreed digest.
  assert.equal(reply.status, 200, JSON.stringify(reply.body));
  assert.equal(reply.body.complete, true);
  await refusedForIntegrity(jobId, uploader, other);
});

test('a checkpoint with the agreed parameters but strategy state its members do not hold is not stored, and its uploader is evicted', { timeout: 60_000 }, async () => {
  // A joiner loads the state with the parameters (DiLoCo's outer momentum steers every outer step
  // after it), so the digest the evaluators agree on covers it; it once covered the parameters alone.
  const { jobId, spec, uploader, other, model } = await uploaderOfSyncOne(server);
  const momentum = new Float32Array(model.length).fill(1e3);
  const reply = await uploadWhole(checkpointOf(spec, model, { 'diloco.outer_momentum': momentum }), uploader, jobId);
  assert.equal(reply.status, 200, JSON.stringify(reply.body));
  await refusedForIntegrity(jobId, uploader, other);
});

test('a file that is not the job\'s model is refused at its last chunk, and its uploader is evicted', { timeout: 60_000 }, async () => {
  const { jobId, uploader, file } = await uploaderOfSyncOne(server);
  const garbage = file.slice();
  garbage.fill(0x7f, 0, 64); // the safetensors header is gone
  const reply = await uploadWhole(garbage, uploader, jobId);
  assert.equal(reply.status, 400);
  assert.equal(reply.body.error.code, 'bad_tensor');
  await waitFor('the uploader is evicted', () => endReason(uploader), 10_000);
  assert.match(endReason(uploader)!, /sent a checkpoint that is not the job's model/);
  assert.equal(await server.store.latestCheckpoint(jobId), null);
  assert.deepEqual(incomingFiles(server), []);
  await server.stopJobs();
});

test('an upload over what the job\'s checkpoint can take is refused when asked for and changes nothing; the checkpoint is taken after', { timeout: 60_000 }, async () => {
  const { jobId, spec, uploader, file } = await uploaderOfSyncOne(server);
  const ack = await beginUpload(uploader, jobId, maxCheckpointBytes(spec) + 1);
  assert.equal(ack.ok, false);
  assert.equal(!ack.ok && ack.error.code, 'too_large');
  assert.match(!ack.ok ? ack.error.message : '', /over the \d+ this job's model can take/);
  assert.deepEqual(incomingFiles(server), []);
  assert.equal(endReason(uploader), undefined, 'the uploader is still a member, still owing the checkpoint');
  const reply = await uploadWhole(file, uploader, jobId);
  assert.equal(reply.body.complete, true);
  await waitFor('the checkpoint of sync 1 is stored', () => server.store.latestCheckpoint(jobId), 10_000);
  await server.stopJobs();
});

test('an uploader that asks again gets a fresh upload: the earlier one is given up and takes no more bytes', { timeout: 60_000 }, async () => {
  const { jobId, uploader, file } = await uploaderOfSyncOne(server);
  const first = (await beginUpload(uploader, jobId, file.byteLength)) as unknown as { url: string; token: string };
  assert.equal((await putChunk(first.url, first.token, file.subarray(0, 100), 0, file.byteLength)).status, 200);
  const second = (await beginUpload(uploader, jobId, file.byteLength)) as unknown as { url: string; token: string };
  assert.notEqual(second.url, first.url);
  const late = await putChunk(first.url, first.token, file.subarray(100), 100, file.byteLength);
  assert.equal(late.status, 404, JSON.stringify(late.body));
  assert.equal(incomingFiles(server).length, 1, 'only the fresh upload\'s file');
  assert.equal((await putChunk(second.url, second.token, file, 0, file.byteLength)).body.complete, true);
  await waitFor('the checkpoint of sync 1 is stored', () => server.store.latestCheckpoint(jobId), 10_000);
  await server.stopJobs();
});

test('a job whose f32 parameters are over the server\'s limit is refused at creation', async () => {
  const small = await startTestServer({ maxModelBytes: MODEL_BYTES - 4 });
  try {
    const r = await small.api('/api/jobs', { method: 'POST', json: BASE_JOB });
    assert.equal(r.status, 400);
    assert.match(r.body.error.message, /this model has [\d,]+ parameters \([\d.]+ MiB of f32\); this server takes models of at most [\d.]+ MiB/);
    assert.equal((await small.api('/api/jobs')).body.jobs.length, 0);
  } finally {
    await small.stop();
  }
});
