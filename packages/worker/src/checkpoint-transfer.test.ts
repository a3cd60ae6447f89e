// A model download the runtime abandons (the server sent a newer model) stops at once: no retry, no
// more bytes asked for, in fetchModel and in the JobEngine's loadModel that the runtime calls. Against
// a local HTTP server that sends a few bytes of a large body, then waits.
import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import { test } from 'node:test';
import { jobSpecSchema } from '@tabfleet/protocol';
import { CpuBackend } from '@tabfleet/tensor';
import { fetchModel } from './checkpoint-transfer';
import { JobEngine } from './job-engine';

/** A server whose every response announces a megabyte, sends a kilobyte, and waits. */
async function stallingServer() {
  const open = new Set<ServerResponse>();
  const state = { requests: 0, url: '', close: () => {} };
  const server = createServer((_req, res) => {
    state.requests++;
    open.add(res);
    res.writeHead(200, { 'content-length': String(1_000_000) });
    res.write(new Uint8Array(1000));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  state.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  state.close = () => {
    for (const res of open) res.destroy();
    server.close();
  };
  return state;
}

test('an aborted model download rejects with the abort\'s reason and is not retried', { timeout: 20_000 }, async () => {
  const server = await stallingServer();
  try {
    const download = new AbortController();
    let bytes = 0;
    const why = new Error('the server sent a newer model');
    const fetched = fetchModel(`${server.url}/model`, undefined, (n) => {
      bytes += n;
      download.abort(why);
    }, download.signal);
    await assert.rejects(fetched, (e) => e === why);
    assert.equal(bytes, 1000);
    assert.equal(server.requests, 1, 'not retried');
  } finally {
    server.close();
  }
});

test('the JobEngine\'s model download stops when it is abandoned, and one begun after is not', { timeout: 60_000 }, async () => {
  const server = await stallingServer();
  try {
    const engine = new JobEngine(new CpuBackend('f32'));
    const spec = jobSpecSchema.parse({ preset: 'mlp-fashion', dataset: 'synthetic-blobs', strategy: 'localsgd', H: 2, hyperparameters: { lr: 0.1, batchSize: 16 } });
    await engine.setup({ job: { id: 'job-1', spec }, shard: { index: 0, count: 1 } }, server.url);
    const stale = engine.loadModel('/checkpoints/2', 4);
    for (let i = 0; i < 100 && engine.downloadedBytes() < 1000; i++) await new Promise((r) => setTimeout(r, 20));
    engine.abandonModelLoad();
    await assert.rejects(stale, /abandoned: the server sent a newer model/);
    engine.abandonModelLoad(); // nothing under way: nothing happens
    const newer = engine.loadModel('/checkpoints/3', 6);
    for (let i = 0; i < 100 && engine.downloadedBytes() < 2000; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(server.requests, 2);
    assert.equal(await Promise.race([newer.then(() => 'ended', () => 'ended'), new Promise((r) => setTimeout(() => r('still loading'), 200))]), 'still loading');
  } finally {
    server.close();
  }
});
