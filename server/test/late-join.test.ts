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

test('a joiner that would make up the minimum after a member left: the sync begins without it and leaves the checkpoint it loads', async () => {
  // Three members, a minimum of three, no checkpoint since the start. One leaves; a joiner is sent no
  // model (none of the members' sync exists) and the two left may not sync below the minimum: before,
  // each waited for the other for ever. Now that sync begins with the two and its uploader leaves one.
  const job = await server.createJob({ minWorkers: 3, maxWorkers: 4, checkpointEvery: 100_000 });
  const members = await Promise.all([0, 1, 2].map(() => server.volunteer({ trainMs: 20 })));
  const joiner = await server.volunteer({ trainMs: 20 });
  try {
    for (const s of members) assert.equal((await s.request(job.id)).ok, true);
    await waitFor('3 syncs', () => members.every((s) => s.committed.length >= 3), 30_000);
    const [leaver, ...stayers] = members;
    leaver.close();
    assert.equal((await joiner.request(job.id)).ok, true);
    const load = await waitFor('the joiner is sent a model', () => joiner.events.find((e) => e.name === 'model:load')?.payload as { seq: number; url: string | null } | undefined, 30_000)
      .catch((e: Error) => { throw new Error(`${e.message}\n${server.logTail(20)}`); });
    assert.ok(load.url, 'a checkpoint, not the seed');
    assert.match(server.logTail(40), new RegExp(`sync ${load.seq} begins with 2 \\(minimum 3\\): joiners wait for its checkpoint`));
    await waitFor('a sync of all three', () => joiner.committed.length >= 1, 30_000);
    const its = joiner.events.find((e) => e.name === 'round:begin')!.payload as RoundBegin;
    assert.equal(its.members.length, 3);
    const seq = joiner.committed[0];
    await waitFor('the others applied it', () => stayers.every((s) => s.applied.has(seq)));
    assert.equal(new Set([joiner, ...stayers].map((s) => checksumOf(s.applied.get(seq)!))).size, 1, 'identical parameters after the sync');
  } finally {
    for (const s of [...members, joiner]) s.close();
  }
});
