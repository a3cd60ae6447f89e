// Secrets at rest and in flight: the data directory is private to the user, a weak TABFLEET_TOKEN stops
// the server at start with a clear error, and checkpoint tickets expire.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startServer } from '../src/app';
import { startTestServer } from '../src/testing/test-server';

const mode = (path: string) => statSync(path).mode & 0o777;

test('the data directory is 0700 and the database and checkpoint files 0600', async () => {
  const server = await startTestServer();
  try {
    const job = await server.createJob();
    const bytes = new Uint8Array([1, 2, 3]);
    await server.store.putCheckpoint(job.id, { seq: 1, step: 2, bytes: 3, sha256: createHash('sha256').update(bytes).digest('hex'), createdAt: Date.now() }, bytes);
    assert.equal(mode(server.dataDir), 0o700);
    assert.equal(mode(join(server.dataDir, 'tabfleet.sqlite')), 0o600);
    assert.equal(mode(join(server.dataDir, 'tabfleet.sqlite-wal')), 0o600);
    assert.equal(mode(join(server.dataDir, 'checkpoints')), 0o700);
    assert.equal(mode(join(server.dataDir, 'checkpoints', job.id, '1.safetensors')), 0o600);
  } finally {
    await server.stop();
  }
});

test('a TABFLEET_TOKEN shorter than 16 characters stops the server at start', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'tabfleet-weak-'));
  const saved = process.env.TABFLEET_TOKEN;
  process.env.TABFLEET_TOKEN = 'hunter2';
  try {
    await assert.rejects(startServer({ port: 0, dataDir, log: () => {} }), (e: Error) => e.name === 'WeakTokenError' && /at least 16 characters/.test(e.message));
    process.env.TABFLEET_TOKEN = 'a-token-of-twenty-chars';
    const ok = await startServer({ port: 0, dataDir, log: () => {} });
    assert.equal(ok.secrets.token, 'a-token-of-twenty-chars');
    await ok.close();
  } finally {
    if (saved === undefined) delete process.env.TABFLEET_TOKEN;
    else process.env.TABFLEET_TOKEN = saved;
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('checkpoint tickets expire, and one cannot be stretched by editing its expiry', async () => {
  const server = await startTestServer({ ticketLifetimeMs: 1_500 });
  try {
    const job = await server.createJob();
    const bytes = new Uint8Array([4, 5, 6]);
    await server.store.putCheckpoint(job.id, { seq: 1, step: 2, bytes: 3, sha256: createHash('sha256').update(bytes).digest('hex'), createdAt: Date.now() }, bytes);
    const ticket = server.secrets.ticket(job.id, 1);
    const url = `${server.url}/api/jobs/${job.id}/checkpoints/1?ticket=${ticket}`;
    assert.equal((await fetch(url)).status, 200);
    const [expiry, mac] = ticket.split('.');
    assert.equal((await fetch(`${server.url}/api/jobs/${job.id}/checkpoints/1?ticket=${Number(expiry) + 3_600_000}.${mac}`)).status, 401);
    await sleep(2_000);
    assert.equal((await fetch(url)).status, 401);
  } finally {
    await server.stop();
  }
});
