// Checkpoints in the Redis store (redis-checkpoints.ts) on a real redis-server whose values may hold
// at most 1 MiB (proto-max-bulk-len; 512 MiB by default, less than a GPT-2 small checkpoint with
// DiLoCo's state): stored a chunk at a time, read whole or by ranges that fetch only their chunks,
// checked against their sha256, pruned with every chunk, and records from before chunking still read.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { CheckpointInfo } from '@tabfleet/protocol';
import { createClient } from 'redis';
import { RedisStore } from '../src/store/redis';
import { CorruptCheckpointError } from '../src/store/store';
import { startRedisServer } from '../src/testing/redis-server';

const CHUNK = 256 * 1024;
let redis: Awaited<ReturnType<typeof startRedisServer>>;
let client: ReturnType<typeof createClient>;
let store: RedisStore;
const dir = mkdtempSync(join(tmpdir(), 'tabfleet-redis-ckpt-'));

before(async () => {
  redis = await startRedisServer(['--proto-max-bulk-len', '1mb']);
  client = createClient({ url: redis.url });
  await client.connect();
  store = new RedisStore(client, { retention: { keepLatest: 2, keepEvery: 0 }, checkpointChunkBytes: CHUNK });
});
after(async () => {
  await client?.quit();
  redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const infoOf = (seq: number, bytes: Uint8Array): CheckpointInfo => ({ seq, step: 2 * seq, bytes: bytes.byteLength, sha256: createHash('sha256').update(bytes).digest('hex'), createdAt: 1000 + seq });
const collect = async (parts: AsyncIterable<Uint8Array>) => {
  const all: Uint8Array[] = [];
  for await (const p of parts) all.push(p);
  return new Uint8Array(Buffer.concat(all));
};
const dataKeys = async (jobId: string) => (await client.keys(`tf:ckpt-data:${jobId}:*`)).sort();

test('a checkpoint past the server\'s value limit is stored from its file a chunk at a time and reads back whole and by ranges', { timeout: 60_000 }, async () => {
  const bytes = new Uint8Array(randomBytes(3 * 2 ** 20 + 12_345));
  const file = join(dir, 'upload.part');
  writeFileSync(file, bytes);
  await store.putCheckpointFile('job-big', infoOf(1, bytes), file);
  assert.equal(existsSync(file), false, 'the file is the store\'s to delete once stored');
  assert.deepEqual(await store.latestCheckpoint('job-big'), infoOf(1, bytes), 'the record as given, nothing of the chunks');
  assert.equal((await dataKeys('job-big')).length, Math.ceil(bytes.byteLength / CHUNK));
  assert.deepEqual(await store.readCheckpoint('job-big', 1), bytes);
  const ranges = (await store.checkpointRanges('job-big', 1))!;
  assert.deepEqual(ranges.info, infoOf(1, bytes));
  // Within a chunk, across chunk boundaries, the last byte, and the whole.
  for (const [start, end] of [[5, 9], [CHUNK - 3, CHUNK + 2], [CHUNK - 1, 3 * CHUNK], [bytes.byteLength - 1, bytes.byteLength - 1], [0, bytes.byteLength - 1]]) {
    assert.deepEqual(await collect(ranges.read(start, end)), bytes.subarray(start, end + 1), `bytes ${start}-${end}`);
  }
  assert.equal(await store.checkpointRanges('job-big', 2), null);
  assert.equal(await store.readCheckpoint('job-big', 2), null);
});

test('a chunk that changed or went is caught against the sha256: neither read whole nor by ranges', async () => {
  const bytes = new Uint8Array(randomBytes(3 * CHUNK));
  await store.putCheckpoint('job-bad', infoOf(1, bytes), bytes);
  await store.putCheckpoint('job-gone', infoOf(1, bytes), bytes);
  const [, second] = await dataKeys('job-bad');
  await client.setRange(second, 10, 'x');
  await assert.rejects(store.readCheckpoint('job-bad', 1), CorruptCheckpointError);
  await assert.rejects(store.checkpointRanges('job-bad', 1), CorruptCheckpointError);
  await client.del((await dataKeys('job-gone'))[2]);
  await assert.rejects(store.readCheckpoint('job-gone', 1), CorruptCheckpointError);
  await assert.rejects(store.checkpointRanges('job-gone', 1), CorruptCheckpointError);
});

test('retention drops a checkpoint with every chunk; a sync stored again replaces its chunks', async () => {
  const of = (seq: number) => new Uint8Array(randomBytes(CHUNK + seq));
  const kept = new Map<number, Uint8Array>();
  for (const seq of [1, 2, 3]) {
    kept.set(seq, of(seq));
    await store.putCheckpoint('job-kept', infoOf(seq, kept.get(seq)!), kept.get(seq)!);
  }
  assert.equal(await store.readCheckpoint('job-kept', 1), null, 'keepLatest 2');
  assert.equal((await dataKeys('job-kept')).length, 4, 'two chunks each for syncs 2 and 3, none left of sync 1');
  const again = new Uint8Array(randomBytes(10));
  await store.putCheckpoint('job-kept', infoOf(3, again), again);
  assert.deepEqual(await store.readCheckpoint('job-kept', 3), again);
  assert.equal((await dataKeys('job-kept')).length, 3, 'sync 3\'s earlier chunks went with its record');
});

test('a checkpoint stored before chunking (one value, a record without chunks) still reads, and is pruned', async () => {
  const bytes = new Uint8Array(randomBytes(1000));
  await client.set('tf:ckpt-data:job-old:4', Buffer.from(bytes));
  await client.hSet('tf:ckpt:job-old', '4', JSON.stringify(infoOf(4, bytes)));
  assert.deepEqual(await store.readCheckpoint('job-old', 4), bytes);
  assert.deepEqual(await collect((await store.checkpointRanges('job-old', 4))!.read(100, 199)), bytes.subarray(100, 200));
  for (const seq of [5, 6]) await store.putCheckpoint('job-old', infoOf(seq, bytes), bytes);
  assert.equal(await client.exists('tf:ckpt-data:job-old:4'), 0);
});
