// A late joiner is admitted only after it loaded the current global model, which the server gets
// from a member right after the next committed round.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { RoundBegin } from '@tabfleet/protocol';
import { checksumOf, modelDigest } from '@tabfleet/protocol';
import { waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

test('a late joiner loads the current global model before it enters a ring', async () => {
  const job = await server.createJob({ minWorkers: 2, maxWorkers: 3, checkpointEvery: 1000 });
  const early = await Promise.all([0, 1].map(() => server.volunteer({ trainMs: 20 })));
  for (const s of early) await s.request(job.id);
  await waitFor('2 syncs without the joiner', () => early.every((s) => s.committed.length >= 2));

  const late = await server.volunteer({ trainMs: 20 });
  assert.equal((await late.request(job.id)).ok, true);
  const load = await waitFor('model:load', () => late.events.find((e) => e.name === 'model:load')?.payload as { seq: number; url: string | null } | undefined, 10_000);
  assert.ok(load.seq >= 2, `loads a committed sync (got ${load.seq})`);
  assert.match(load.url ?? '', /\/checkpoints\/\d+\?ticket=/);
  // What it loaded is exactly what the members applied at that sync.
  const loaded = await waitFor('loaded', () => late.loadedFrom[0]);
  const applied = early[0].applied.get(load.seq)!;
  assert.equal(loaded.digest, modelDigest(applied));

  // Every round it takes part in starts after the sync it loaded, and all three agree afterwards.
  await waitFor('a sync with all three', () => late.committed.length >= 2, 15_000);
  const its = late.events.filter((e) => e.name === 'round:begin').map((e) => e.payload as RoundBegin);
  assert.ok(its.every((r) => r.seq > load.seq && r.members.length === 3));
  const seq = late.committed[1];
  await waitFor('the others applied that sync', () => early.every((s) => s.applied.has(seq)));
  const sums = [late, ...early].map((s) => checksumOf(s.applied.get(seq)!));
  assert.equal(new Set(sums).size, 1, 'identical parameters after the sync');

  // The ticket opens only that checkpoint; without it the download needs the researcher token.
  const other = load.url!.replace(`/checkpoints/${load.seq}?`, `/checkpoints/${load.seq + 1}?`);
  assert.equal((await fetch(other)).status, 401);
  assert.equal((await fetch(load.url!.split('?')[0])).status, 401);
});
