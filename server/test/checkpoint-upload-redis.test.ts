// A checkpoint uploaded over HTTP to a server whose store is Redis: the part file is stored a chunk at
// a time (and deleted), and loads of it answer Range requests from the chunks they cover, not the whole.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createHash } from 'node:crypto';
import { createClient } from 'redis';
import { startRedisServer } from '../src/testing/redis-server';
import { waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';
import { beginUpload, incomingFiles, putChunk, uploaderOfSyncOne } from './checkpoint-upload-jobs';

/** Bytes per stored value: the MLP's checkpoint (814 KB) spans 13. */
const CHUNK = 64 * 1024;
let redis: Awaited<ReturnType<typeof startRedisServer>>;
let server: TestServer;
before(async () => {
  redis = await startRedisServer();
  server = await startTestServer({ redisUrl: redis.url, redisCheckpointChunkBytes: CHUNK, timing: { roundTimeoutMs: 30_000, barrierTimeoutMs: 30_000, loadTimeoutMs: 60_000 } });
});
after(async () => {
  await server.stop();
  redis.stop();
});

test('with Redis as the store, an HTTP upload becomes the job\'s checkpoint and loads by range', { timeout: 60_000 }, async () => {
  assert.equal(server.store.kind, 'redis');
  const { jobId, uploader, file } = await uploaderOfSyncOne(server);
  const ack = (await beginUpload(uploader, jobId, file.byteLength)) as unknown as { url: string; token: string };
  const half = Math.floor(file.byteLength / 2);
  assert.equal((await putChunk(ack.url, ack.token, file.subarray(0, half), 0, file.byteLength)).body.complete, false);
  assert.equal((await putChunk(ack.url, ack.token, file.subarray(half), half, file.byteLength)).body.complete, true);
  const stored = await waitFor('the checkpoint of sync 1 is stored', () => server.store.latestCheckpoint(jobId), 10_000);
  assert.equal(stored.sha256, createHash('sha256').update(file).digest('hex'));
  // The store commits the blob, then deletes the part file: a moment apart.
  await waitFor('the part file is deleted', () => incomingFiles(server).length === 0, 10_000);
  const part = await fetch(`${server.url}/api/jobs/${jobId}/checkpoints/1`, { headers: { authorization: 'Bearer test-token', range: 'bytes=-100' } });
  assert.equal(part.status, 206);
  assert.equal(part.headers.get('content-range'), `bytes ${file.byteLength - 100}-${file.byteLength - 1}/${file.byteLength}`);
  assert.deepEqual(new Uint8Array(await part.arrayBuffer()), file.subarray(file.byteLength - 100));
  await server.stopJobs();

  // Checked once (the request above read every chunk through the hash), a range reads its chunks only:
  // what redis-server sent its clients meanwhile is under one chunk, where the whole is 13.
  assert.ok(file.byteLength > 10 * CHUNK, `${file.byteLength} bytes`);
  const probe = createClient({ url: redis.url });
  await probe.connect();
  try {
    const sent = async () => Number(/total_net_output_bytes:(\d+)/.exec(await probe.info('stats'))![1]);
    const before = await sent();
    const range = await fetch(`${server.url}/api/jobs/${jobId}/checkpoints/1`, { headers: { authorization: 'Bearer test-token', range: `bytes=${CHUNK - 50}-${CHUNK + 49}` } });
    assert.equal(range.status, 206);
    assert.deepEqual(new Uint8Array(await range.arrayBuffer()), file.subarray(CHUNK - 50, CHUNK + 50), 'across a chunk boundary');
    const read = (await sent()) - before;
    console.log(`redis-server sent ${read} bytes for a range of 100`);
    assert.ok(read < CHUNK, `redis-server sent ${read} bytes for a range of 100`);
  } finally {
    await probe.quit();
  }
});
