// Dataset files and per-worker shards over HTTP.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { decodeFashionShard, shardIndices } from '@tabfleet/data';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

test('a worker downloads exactly its shard of Fashion-MNIST, and shards are disjoint', async () => {
  const get = async (i: number, n: number) => {
    const res = await fetch(`${server.url}/datasets/fashion-mnist/shards/${i}/${n}?seed=3`);
    assert.equal(res.status, 200);
    return decodeFashionShard(new Uint8Array(await res.arrayBuffer()));
  };
  const [a, b] = [await get(0, 4), await get(1, 4)];
  assert.equal(a.count, shardIndices(60_000, 0, 4, 3).length);
  assert.equal(a.features, 784);
  assert.ok(a.y.every((y) => y >= 0 && y <= 9));
  // Different shards hold different images (compare a few rows).
  const row = (d: typeof a, i: number) => d.x.subarray(i * 784, (i + 1) * 784).join(',');
  assert.notEqual(row(a, 0), row(b, 0));
  const whole = await fetch(`${server.url}/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz`);
  assert.equal(whole.status, 200);
  assert.equal((await fetch(`${server.url}/datasets/fashion-mnist/shards/4/4`)).status, 400);
  assert.equal((await fetch(`${server.url}/datasets/fashion-mnist/nope.gz`)).status, 404);
});
