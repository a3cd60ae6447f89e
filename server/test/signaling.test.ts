// WebRTC signaling is relayed only between current ring neighbours.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { RoundBegin } from '@tabfleet/protocol';
import { waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

test('signals reach ring neighbours and are refused between non-neighbours', async () => {
  const job = await server.createJob({ minWorkers: 4, maxWorkers: 4, trust: 'trusted' });
  const sims = await Promise.all([0, 1, 2, 3].map(() => server.volunteer()));
  for (const s of sims) s.holdRounds = true;
  for (const s of sims) await s.request(job.id);
  const begin = await waitFor('round:begin', () => sims[0].events.find((e) => e.name === 'round:begin')?.payload as RoundBegin | undefined);
  const byId = new Map(sims.map((s) => [s.volunteerId, s]));
  const ring = begin.members.map((id) => byId.get(id)!);
  const sdp = { type: 'offer', sdp: 'v=0 simulated' };

  const ok = await ring[0].emit('signal', { jobId: job.id, roundId: begin.roundId, to: ring[1].volunteerId, data: sdp });
  assert.deepEqual(ok, { ok: true });
  const got = await waitFor('relayed signal', () => ring[1].events.find((e) => e.name === 'signal')?.payload as { from: string; data: unknown } | undefined);
  assert.equal(got.from, ring[0].volunteerId);
  assert.deepEqual(got.data, sdp);
  // The ring closes: the last member's right neighbour is the first.
  assert.equal((await ring[3].emit('signal', { jobId: job.id, roundId: begin.roundId, to: ring[0].volunteerId, data: sdp })).ok, true);

  const refused = await ring[0].emit('signal', { jobId: job.id, roundId: begin.roundId, to: ring[2].volunteerId, data: sdp });
  assert.equal(refused.ok, false);
  assert.equal(!refused.ok && refused.error.code, 'not_neighbour');
  const stale = await ring[0].emit('signal', { jobId: job.id, roundId: begin.roundId + 7, to: ring[1].volunteerId, data: sdp });
  assert.equal(!stale.ok && stale.error.code, 'stale_round');
  // A neighbour's signal to it after the refused ones, delivered in order on its connection: once it is
  // in, anything the refused signals had sent would be in too.
  const marker = { type: 'answer', sdp: 'v=0 after the refused ones' };
  assert.deepEqual(await ring[1].emit('signal', { jobId: job.id, roundId: begin.roundId, to: ring[2].volunteerId, data: marker }), { ok: true });
  await waitFor('the neighbour\'s signal', () => ring[2].events.some((e) => e.name === 'signal'));
  const toNonNeighbour = ring[2].events.filter((e) => e.name === 'signal').map((e) => e.payload as { from: string; data: unknown });
  assert.deepEqual(toNonNeighbour, [{ jobId: job.id, roundId: begin.roundId, from: ring[1].volunteerId, data: marker }], 'the non-neighbour received only its neighbour\'s signal');

  for (const s of sims) {
    s.holdRounds = false;
    s.releaseRound();
  }
  await waitFor('the round commits', () => sims.every((s) => s.committed.length >= 1));
});
