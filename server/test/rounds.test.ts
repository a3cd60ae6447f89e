// Join, assignment, ring formation and full rounds through real Socket.IO connections.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { RoundBegin } from '@tabfleet/protocol';
import { checksumOf } from '@tabfleet/protocol';
import { waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

test('volunteers join, are assigned shards, form a ring and commit rounds with equal checksums', async () => {
  const job = await server.createJob({ minWorkers: 3, maxWorkers: 3, trust: 'trusted' });
  const sims = await Promise.all([0, 1, 2].map(() => server.volunteer()));
  for (const s of sims) {
    const ack = await s.request();
    assert.equal(ack.ok, true);
    assert.equal(ack.ok && ack.assigned, true);
  }
  assert.deepEqual(sims.map((s) => s.assignment!.shard.index).sort(), [0, 1, 2]);
  assert.ok(sims.every((s) => s.assignment!.shard.count === 3));
  await waitFor('3 committed syncs', () => sims.every((s) => s.committed.length >= 3));
  const begins = sims[0].events.filter((e) => e.name === 'round:begin').map((e) => e.payload as RoundBegin);
  assert.equal(begins[0].seq, 1);
  assert.equal(begins[0].mode, 'ring');
  assert.deepEqual([...begins[0].members].sort(), sims.map((s) => s.volunteerId).sort());
  // Everyone applied the same mean.
  for (const seq of [1, 2, 3]) assert.equal(new Set(sims.map((s) => checksumOf(s.applied.get(seq)!))).size, 1, `sync ${seq}`);
  const rounds = (await server.api(`/api/jobs/${job.id}/rounds`)).body.rounds;
  const committed = rounds.filter((r: { outcome: string }) => r.outcome === 'committed');
  assert.ok(committed.length >= 3);
  assert.ok(committed.every((r: { detail: string }) => /^[0-9a-f]{16}$/.test(r.detail)), 'committed rounds record one checksum');
  const detail = (await server.api(`/api/jobs/${job.id}`)).body;
  assert.equal(detail.job.state, 'running');
  assert.equal(detail.workers.length, 3);
});
