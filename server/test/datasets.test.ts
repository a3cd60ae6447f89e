// Dataset files and per-worker shards over HTTP: shards only for members of an unfinished job that
// uses them (the ticket in their assignment), built once, cacheable, and memory bounded when clients
// never read.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { decodeFashionShard, shardIndices } from '@tabfleet/data';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

async function assignedUrl(spec: Parameters<TestServer['createJob']>[0], strict = true): Promise<{ jobId: string; url: string; index: number; count: number }> {
  const job = await server.createJob(spec);
  const v = await server.volunteer();
  v.holdReady = true; // a member, but not training: the memory test measures the server, not this volunteer
  assert.equal((await v.request(job.id)).ok, true);
  for (let i = 0; i < 100 && !v.assignment; i++) await sleep(20);
  const a = v.assignment!;
  if (strict) assert.ok(a.dataUrl, 'a fashion-mnist assignment carries its shard URL');
  // Not strict: the memory test also runs against a server whose assignments carry no URL.
  const url = a.dataUrl ? new URL(a.dataUrl, server.url).href : `${server.url}/datasets/fashion-mnist/shards/${a.shard.index}/${a.shard.count}?seed=${a.job.spec.seed}`;
  return { jobId: job.id, url, index: a.shard.index, count: a.shard.count };
}

test('a member downloads exactly its shard with the ticket from its assignment; nobody else does', async () => {
  const { url, index, count } = await assignedUrl({ seed: 3 });
  const res = await fetch(url);
  assert.equal(res.status, 200);
  const etag = res.headers.get('etag');
  assert.ok(etag);
  assert.match(res.headers.get('cache-control') ?? '', /max-age=\d+/);
  const shard = decodeFashionShard(new Uint8Array(await res.arrayBuffer()));
  assert.equal(shard.count, shardIndices(60_000, index, count, 3).length);
  assert.equal(shard.features, 784);
  assert.ok(shard.y.every((y) => y >= 0 && y <= 9));
  // The client already holds it: 304, no bytes.
  const again = await fetch(url, { headers: { 'if-none-match': etag! } });
  assert.equal(again.status, 304);

  const bare = new URL(url);
  bare.search = `?seed=3`;
  assert.equal((await fetch(bare)).status, 401, 'no ticket, no shard');
  const other = new URL(url.replace(`/shards/${index}/`, `/shards/${index + 1}/`));
  assert.equal((await fetch(other)).status, 401, "a ticket for one shard does not open another");
  const reseeded = new URL(url);
  reseeded.searchParams.set('seed', '4');
  assert.equal((await fetch(reseeded)).status, 401, 'nor the same shard dealt with another seed');

  // The researcher may fetch any shard with the token; bad shard numbers are 400.
  const researcher = await server.api(`/datasets/fashion-mnist/shards/1/4?seed=3`);
  assert.equal(researcher.status, 200);
  assert.equal((await server.api(`/datasets/fashion-mnist/shards/4/4`)).status, 400);
  const whole = await fetch(`${server.url}/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz`);
  assert.equal(whole.status, 200);
  assert.equal((await fetch(`${server.url}/datasets/fashion-mnist/nope.gz`)).status, 404);
});

test("a job's shards are no longer served once it has ended", async () => {
  const { jobId, url } = await assignedUrl({ seed: 5 });
  assert.equal((await fetch(url, { method: 'HEAD' })).status, 200);
  assert.equal((await server.api(`/api/jobs/${jobId}/stop`, { method: 'POST' })).status, 200);
  assert.equal((await fetch(url, { method: 'HEAD' })).status, 401);
});

test('clients that never read cost the server one cached shard, not a copy each', async () => {
  // maxWorkers 1: the whole training set in one shard, 47 MB, as in the issue.
  const { url } = await assignedUrl({ seed: 7, minWorkers: 1, maxWorkers: 1 }, false);
  const { pathname, search } = new URL(url);
  const CLIENTS = 8;
  // Four per address at most: the others come from other loopback addresses.
  const sockets = Array.from({ length: CLIENTS }, (_, i) => {
    const s = connect({ host: '127.0.0.1', port: server.port, localAddress: `127.0.0.${2 + (i % 4)}` });
    s.write(`GET ${pathname}${search} HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n\r\n`);
    s.pause(); // never reads: the kernel buffers fill and the server has to hold what it wrote
    return s;
  });
  const before = process.memoryUsage();
  await sleep(4_000); // the old server built one 47 MB shard per request, 0.4 s each
  const during = process.memoryUsage();
  const growthMb = (during.arrayBuffers - before.arrayBuffers) / 2 ** 20;
  const rssMb = (during.rss - before.rss) / 2 ** 20;
  console.log(`${CLIENTS} non-reading clients: arrayBuffers +${growthMb.toFixed(0)} MB, RSS +${rssMb.toFixed(0)} MB (rss ${(during.rss / 2 ** 20).toFixed(0)} MB)`);
  for (const s of sockets) s.destroy();
  // One 47 MB shard in the cache, plus socket buffers; eight copies would be 376 MB.
  assert.ok(growthMb < 120, `arrayBuffers grew ${growthMb.toFixed(0)} MB`);
});
