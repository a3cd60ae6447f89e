// A checkpoint uploaded over HTTP in byte ranges: the round's uploader is handed a URL and token,
// sends chunks, loses its connection mid-chunk, asks what the server holds and sends the rest; the
// file, checked against the evaluators' agreed digest, becomes the job's checkpoint, and loads answer
// Range requests. Chunks from the wrong offset, past the end, longer than their range or without
// the token are refused and change nothing.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { CHECKPOINT_SHA256_HEADER, verifyCheckpoint } from '@tabfleet/protocol';
import { createHash } from 'node:crypto';
import { waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';
import { beginUpload, droppedPut, incomingFiles, progress, putChunk, uploaderOfSyncOne } from './checkpoint-upload-jobs';

let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 30_000, barrierTimeoutMs: 30_000, loadTimeoutMs: 60_000 } });
});
after(() => server.stop());

test('an upload resumes after a dropped connection from what the server holds, and becomes the job\'s checkpoint', { timeout: 60_000 }, async () => {
  const { jobId, spec, uploader, file } = await uploaderOfSyncOne(server);
  const ack = await beginUpload(uploader, jobId, file.byteLength);
  assert.equal(ack.ok, true, JSON.stringify(ack));
  const { url, token } = ack as unknown as { url: string; token: string };
  assert.match(url, /\/api\/checkpoint-uploads\/cu-[0-9a-f]{16}$/);
  assert.deepEqual((await progress(url, token)).body, { bytes: file.byteLength, received: 0 });

  const third = Math.floor(file.byteLength / 3);
  assert.deepEqual((await putChunk(url, token, file.subarray(0, third), 0, file.byteLength)).body, { bytes: file.byteLength, received: third, complete: false });
  // The second chunk's connection drops after 1,000 of its bytes: they are kept.
  await droppedPut(url, token, file, third, 2 * third - 1, 1_000);
  const held = third + 1_000;

  // Refusals that change nothing: the wrong offset, past the end, a total that is not the upload's,
  // a body longer than its range, no token or another.
  const refusals: [number, string, Promise<{ status: number; body: any }>][] = [
    [409, `send from byte ${held}`, putChunk(url, token, file.subarray(0, 10), 0, file.byteLength)],
    [400, 'past the upload\'s last byte', putChunk(url, token, file.subarray(held), held, file.byteLength, `bytes ${held}-${file.byteLength}/${file.byteLength}`)],
    [400, `this upload is of ${file.byteLength} bytes`, putChunk(url, token, file.subarray(held, held + 10), held, file.byteLength + 1)],
    [400, 'longer than its Content-Range', putChunk(url, token, file.subarray(held, held + 20), held, file.byteLength, `bytes ${held}-${held + 9}/${file.byteLength}`)],
    [401, 'wrong upload token', putChunk(url, 'f'.repeat(48), file.subarray(held), held, file.byteLength)],
    [401, 'wrong upload token', progress(url, '')],
    [400, 'Content-Range: bytes START-END/TOTAL', putChunk(url, token, file.subarray(held), held, file.byteLength, 'bytes=0-')],
  ];
  for (const [status, message, reply] of refusals) {
    const r = await reply;
    assert.equal(r.status, status, JSON.stringify(r.body));
    assert.ok(r.body.error.message.includes(message), r.body.error.message);
    assert.equal((await progress(url, token)).body.received, held, `after a ${status} (${message}) the server holds what it held`);
  }
  assert.equal((await server.store.latestCheckpoint(jobId)), null, 'nothing is stored before the last byte');

  // The uploader asks what the server holds and sends the rest.
  // (Until the server has seen the drop, the dropped request still holds the upload: 409, asked again.)
  const resumeAt = (await progress(url, token)).body.received;
  const last = await waitFor('the rest is taken', async () => {
    const r = await putChunk(url, token, file.subarray(resumeAt), resumeAt, file.byteLength);
    return r.status === 409 && /another request is writing/.test(r.body.error.message) ? null : r;
  }, 10_000);
  assert.deepEqual(last.body, { bytes: file.byteLength, received: file.byteLength, complete: true });
  const stored = await waitFor('the checkpoint of sync 1 is stored', () => server.store.latestCheckpoint(jobId), 10_000);
  assert.equal(stored.seq, 1);
  assert.equal(stored.sha256, createHash('sha256').update(file).digest('hex'));
  assert.deepEqual(incomingFiles(server), [], 'the upload\'s file moved into the store');
  assert.equal((await progress(url, token)).status, 404, 'a finished upload takes no more chunks');

  // Loads: whole, a range, and a range past the end.
  const whole = await fetch(`${server.url}/api/jobs/${jobId}/checkpoints/1`, { headers: { authorization: 'Bearer test-token' } });
  assert.equal(whole.headers.get('accept-ranges'), 'bytes');
  assert.equal(whole.headers.get(CHECKPOINT_SHA256_HEADER), stored.sha256);
  assert.deepEqual(new Uint8Array(await whole.arrayBuffer()), file);
  assert.ok(verifyCheckpoint(spec, file));
  const part = await fetch(`${server.url}/api/jobs/${jobId}/checkpoints/1`, { headers: { authorization: 'Bearer test-token', range: `bytes=${third}-` } });
  assert.equal(part.status, 206);
  assert.equal(part.headers.get('content-range'), `bytes ${third}-${file.byteLength - 1}/${file.byteLength}`);
  assert.deepEqual(new Uint8Array(await part.arrayBuffer()), file.subarray(third));
  const past = await fetch(`${server.url}/api/jobs/${jobId}/checkpoints/1`, { headers: { authorization: 'Bearer test-token', range: `bytes=${file.byteLength}-` } });
  assert.equal(past.status, 416);
  assert.equal(past.headers.get('content-range'), `bytes */${file.byteLength}`);
  await server.stopJobs();
});
