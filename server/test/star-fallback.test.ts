// A worker that cannot reach its ring neighbours makes the round fall back to the star path: every
// member sends its update to the server, which aggregates it (mean or trimmed mean) and sends it back.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { aggregateWith, checksumOf, PRESET_FLAT_LENGTHS, type RoundBegin } from '@tabfleet/protocol';
import { waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

const LENGTH = PRESET_FLAT_LENGTHS['cnn-fashion'];
let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

test('an unreachable neighbour turns the round into a star round aggregated by the server', async () => {
  const job = await server.createJob({ preset: 'cnn-fashion', minWorkers: 3, maxWorkers: 3, trust: 'trusted' });
  const sims = await Promise.all([0, 1, 2].map(() => server.volunteer()));
  let failed = false;
  sims[1].failRound = (r) => (r.mode === 'ring' && !failed ? ((failed = true), 'unreachable') : null);
  for (const s of sims) s.holdRounds = false;
  const before = new Map<string, Float32Array>();
  for (const s of sims) await s.request(job.id);
  const star = await waitFor('a star round', () => sims[0].events.map((e) => e.payload as RoundBegin).find((p) => p?.mode === 'star'));
  for (const s of sims) before.set(s.volunteerId, s.params.slice());
  await waitFor('the star round commits', () => sims.every((s) => s.applied.has(star.seq)));
  const expected = new Float32Array(LENGTH);
  for (const v of before.values()) for (let i = 0; i < LENGTH; i++) expected[i] += v[i];
  for (let i = 0; i < LENGTH; i++) expected[i] /= 3;
  for (const s of sims) {
    const got = s.applied.get(star.seq)!;
    assert.ok(got.every((x, i) => Math.abs(x - expected[i]) < 1e-5), 'the server returned the mean');
  }
  assert.equal(new Set(sims.map((s) => checksumOf(s.applied.get(star.seq)!))).size, 1);
  const result = sims[0].events.find((e) => e.name === 'star:result')!.payload as { contributors: number; rejected: number };
  assert.deepEqual([result.contributors, result.rejected], [3, 0]);
  // The next sync tries the ring again.
  await waitFor('a ring round after the star round', () => sims[0].events.map((e) => e.payload as RoundBegin).find((p) => p?.mode === 'ring' && p.seq > star.seq));
});

test('robust aggregation: trimmed mean, norm outliers rejected, bad tensors refused', async () => {
  const job = await server.createJob({ preset: 'cnn-fashion', minWorkers: 4, maxWorkers: 4, aggregation: 'trimmed-mean', trimFraction: 0.25, trust: 'trusted' });
  const sims = await Promise.all([0, 1, 2, 3].map(() => server.volunteer()));
  for (const s of sims) s.failRound = (r) => (r.mode === 'ring' ? 'unreachable' : null);
  for (const s of sims) s.holdRounds = true;
  for (const s of sims) await s.request(job.id);
  // The ring round fails everywhere, then the star round is held open: sims 0 and 3 send by hand.
  await waitFor('the ring round', () => sims.every((s) => s.events.some((e) => e.name === 'round:begin')));
  for (const s of sims) s.releaseRound();
  const star = await waitFor('star round', () => sims[0].events.map((e) => e.payload as RoundBegin).find((p) => p?.mode === 'star'));
  const send = (i: number, values: Float32Array) => sims[i].emit('star:update', { jobId: job.id, roundId: star.roundId, data: new Uint8Array(values.buffer.slice(0)) });
  const wrongLength = await sims[0].emit('star:update', { jobId: job.id, roundId: star.roundId, data: new Uint8Array(12) });
  assert.equal(!wrongLength.ok && wrongLength.error.code, 'bad_tensor');
  const nan = sims[0].params.slice();
  nan[7] = Number.NaN;
  const notFinite = await send(0, nan);
  assert.equal(!notFinite.ok && notFinite.error.code, 'bad_tensor');
  assert.match(!notFinite.ok ? notFinite.error.message : '', /value 7 is NaN/);
  assert.equal((await send(0, sims[0].params)).ok, true);
  const again = await send(0, sims[0].params);
  assert.equal(!again.ok && again.error.code, 'conflict');
  // sims[3] is hostile: an update a thousand times the others' norm.
  assert.equal((await send(3, sims[3].params.map((x) => x * 1000))).ok, true);
  const honest = [0, 1, 2].map((i) => sims[i].params.slice());
  sims[1].releaseRound();
  sims[2].releaseRound();
  await waitFor('the star round commits', () => sims.every((s) => s.applied.has(star.seq)));
  assert.equal(new Set(sims.map((s) => checksumOf(s.applied.get(star.seq)!))).size, 1);
  const result = sims[0].events.find((e) => e.name === 'star:result' && (e.payload as { roundId: number }).roundId === star.roundId)!.payload as { contributors: number; rejected: number };
  assert.deepEqual([result.contributors, result.rejected], [3, 1]);
  // Trimmed mean of the three honest updates with k = floor(3 * 0.25) = 0: their plain mean.
  const got = sims[1].applied.get(star.seq)!;
  assert.ok(got.every((x, i) => Math.abs(x - (honest[0][i] + honest[1][i] + honest[2][i]) / 3) < 1e-5));
});

test("an untrusted job's group round falls back to a star round combined by its rule (centered-clip)", async () => {
  const job = await server.createJob({ preset: 'cnn-fashion', minWorkers: 4, maxWorkers: 4 });
  const sims = await Promise.all([0, 1, 2, 3].map(() => server.volunteer()));
  for (const s of sims) s.failRound = (r) => (r.mode === 'group' ? 'unreachable' : null);
  // sims[3] is hostile in the star round: its update is a thousand times the others'.
  sims[3].holdRounds = true;
  for (const s of sims) await s.request(job.id);
  await waitFor('the group round', () => sims[3].events.some((e) => (e.payload as RoundBegin)?.mode === 'group'));
  sims[3].releaseRound();
  const star = await waitFor('star round', () => sims[3].events.map((e) => e.payload as RoundBegin).find((p) => p?.mode === 'star'));
  // The server combines in the round's member order.
  const honest = star.members.filter((id) => id !== sims[3].volunteerId).map((id) => sims.find((s) => s.volunteerId === id)!.params.slice());
  assert.equal((await sims[3].emit('star:update', { jobId: job.id, roundId: star.roundId, data: new Uint8Array(sims[3].params.map((x) => x * 1000).buffer) })).ok, true);
  sims[3].releaseRound(); // it reports its result once the server's comes
  await waitFor('the star round commits', () => [0, 1, 2].every((i) => sims[i].applied.has(star.seq)));
  const result = sims[0].events.find((e) => e.name === 'star:result' && (e.payload as { roundId: number }).roundId === star.roundId)!.payload as { contributors: number; rejected: number };
  assert.deepEqual([result.contributors, result.rejected], [3, 1]);
  const expected = aggregateWith('centered-clip', honest);
  assert.ok(sims[0].applied.get(star.seq)!.every((x, i) => Object.is(x, expected[i])), 'the centered clip of the three honest updates');
});
