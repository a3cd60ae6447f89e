// Checkpoints and metrics through the real server and SQLite store: a corrupted checkpoint is refused,
// a repeated metric point is stored once, downloads carry every row, old checkpoints are pruned by
// the retention rule, a database from before metric keys is migrated without its duplicates, and one from before
// job notices gains them.
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { MetricPoint } from '@tabfleet/protocol';
import { SqliteStore } from '../src/store/sqlite';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer({ checkpointRetention: { keepLatest: 3, keepEvery: 10 } });
});
after(() => server.stop());

const syncPoint = (seq: number): MetricPoint => ({ seq, step: seq * 2, time: 1_000 + seq, loss: 1 / seq, accuracy: null, samplesPerSec: 100, bytesSent: 4096, workers: 2 });
const evalPoint = (seq: number, accuracy: number): MetricPoint => ({ seq, step: seq * 2, time: 1_000 + seq, loss: 0.5, accuracy, samplesPerSec: null, bytesSent: null, workers: 2 });

async function putCheckpoint(jobId: string, seq: number, bytes: Uint8Array): Promise<void> {
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  await server.store.putCheckpoint(jobId, { seq, step: seq * 2, bytes: bytes.byteLength, sha256, createdAt: Date.now() }, bytes);
}

test('a checkpoint whose file no longer matches its sha256 is an error, not served', async () => {
  const job = await server.createJob();
  await putCheckpoint(job.id, 1, new Uint8Array([1, 2, 3, 4]));
  assert.equal((await server.api(`/api/jobs/${job.id}/checkpoints/1`)).status, 200);
  writeFileSync(join(server.dataDir, 'checkpoints', job.id, '1.safetensors'), new Uint8Array([9, 9, 9, 9]));
  const res = await server.api(`/api/jobs/${job.id}/checkpoints/1`);
  assert.equal(res.status, 500);
  assert.match(res.body.error.message, /corrupted/);
  assert.equal((await server.api(`/api/jobs/${job.id}/checkpoint`)).status, 500);
});

test('a sync whose metrics are stored again (re-committed after a restart) has one row of each kind', async () => {
  const job = await server.createJob();
  await server.store.addMetric(job.id, syncPoint(1));
  await server.store.addMetric(job.id, evalPoint(1, 0.5));
  await server.store.addMetric(job.id, syncPoint(1));
  await server.store.addMetric(job.id, evalPoint(1, 0.6));
  const { body } = await server.api(`/api/jobs/${job.id}/metrics`);
  assert.equal(body.points.length, 2);
  assert.deepEqual(body.points.map((p: MetricPoint) => p.accuracy), [null, 0.6]);
});

test('metrics downloads carry every row, past 100,000', async () => {
  const job = await server.createJob();
  const ROWS = 100_007;
  for (let seq = 1; seq <= ROWS; seq++) await server.store.addMetric(job.id, syncPoint(seq));
  // The inserts held the event loop for seconds: let idle keep-alive sockets close before asking.
  await sleep(200);
  const csv = await server.api(`/api/jobs/${job.id}/metrics.csv`);
  assert.equal(csv.status, 200);
  const lines = csv.text.trimEnd().split('\n');
  assert.equal(lines.length, ROWS + 1);
  assert.match(lines[0], /^seq,step/);
  assert.equal(lines[ROWS].split(',')[0], String(ROWS));
  const json = await server.api(`/api/jobs/${job.id}/metrics`);
  assert.equal(json.body.points.length, ROWS);
  assert.equal(json.body.points.at(-1).seq, ROWS);
});

test('checkpoints are pruned by the retention rule: the latest K and every Mth', async () => {
  const job = await server.createJob();
  for (let seq = 1; seq <= 25; seq++) await putCheckpoint(job.id, seq, new Uint8Array([seq]));
  const files = readdirSync(join(server.dataDir, 'checkpoints', job.id)).sort((a, b) => parseInt(a) - parseInt(b));
  assert.deepEqual(files, ['10.safetensors', '20.safetensors', '23.safetensors', '24.safetensors', '25.safetensors']);
  assert.equal((await server.api(`/api/jobs/${job.id}/checkpoints/10`)).status, 200);
  assert.equal((await server.api(`/api/jobs/${job.id}/checkpoints/11`)).status, 404);
  assert.equal((await server.store.latestCheckpoint(job.id))?.seq, 25);
});

test('a database from before metric keys keeps one row per sync and kind after it is opened', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tabfleet-migrate-'));
  try {
    const db = new Database(join(dir, 'tabfleet.sqlite'));
    db.exec(`CREATE TABLE metrics (job_id TEXT NOT NULL, seq INTEGER NOT NULL, step INTEGER NOT NULL, time INTEGER NOT NULL,
      loss REAL, accuracy REAL, samples_per_sec REAL, bytes_sent REAL, workers INTEGER NOT NULL)`);
    const ins = db.prepare('INSERT INTO metrics VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)');
    for (const seq of [1, 2, 2, 3]) ins.run('job-a', seq, seq, seq, 1, null, 10, 100, 2); // sync 2 stored twice
    ins.run('job-a', 2, 2, 2, 1, 0.7, null, null, 2);
    db.close();
    const store = new SqliteStore(dir);
    return store.metricsPage('job-a', 0, 100).then(async (page) => {
      assert.deepEqual(page.points.map((p) => [p.seq, p.accuracy]), [[1, null], [2, null], [3, null], [2, 0.7]]);
      await store.addMetric('job-a', syncPoint(2));
      assert.equal((await store.metricsPage('job-a', 0, 100)).points.length, 4);
      await store.close();
    });
  } finally {
    if (existsSync(dir)) setTimeout(() => rmSync(dir, { recursive: true, force: true }), 1_000);
  }
});

test('a database from before job notices gains the column: its jobs load, and a notice written is read back', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tabfleet-migrate-'));
  try {
    const db = new Database(join(dir, 'tabfleet.sqlite'));
    db.exec(`CREATE TABLE jobs (id TEXT PRIMARY KEY, name TEXT NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL,
      created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, seq INTEGER NOT NULL, step INTEGER NOT NULL, end_reason TEXT)`);
    db.prepare('INSERT INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)').run('job-old', 'old', '{"preset":"mlp-fashion"}', 'running', 1, 2, 3, 6, null);
    db.close();
    const store = new SqliteStore(dir);
    const job = (await store.getJob('job-old'))!;
    assert.deepEqual([job.seq, job.step, job.notice], [3, 6, undefined]);
    await store.updateJob({ ...job, notice: 'sync 3: held back' });
    assert.equal((await store.getJob('job-old'))?.notice, 'sync 3: held back');
    await store.close();
  } finally {
    if (existsSync(dir)) setTimeout(() => rmSync(dir, { recursive: true, force: true }), 1_000);
  }
});
