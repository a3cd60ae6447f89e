// Scale-out: two server nodes share a real redis-server (started here). Volunteers connected to
// different nodes join one job, signal each other through the Redis adapter and complete rounds.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { RoundBegin } from '@tabfleet/protocol';
import { checksumOf } from '@tabfleet/protocol';
import { RingOracle, SimVolunteer, waitFor } from '../src/testing/sim-volunteer';
import { startRedisServer } from '../src/testing/redis-server';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let redis: Awaited<ReturnType<typeof startRedisServer>>;
let nodes: TestServer[] = [];

before(async () => {
  redis = await startRedisServer();
  const redisUrl = redis.url;
  nodes = [await startTestServer({ redisUrl, nodeId: 'node-a' }), await startTestServer({ redisUrl, nodeId: 'node-b' })];
});

after(async () => {
  for (const n of nodes) await n.stop();
  redis.stop();
});

test('volunteers on two nodes form one ring, signal across nodes and commit rounds', async () => {
  const [a, b] = nodes;
  assert.equal((await (await fetch(`${a.url}/healthz`)).json()).store, 'redis');
  const job = await a.createJob({ minWorkers: 4, maxWorkers: 4, trust: 'trusted' });
  // The job is visible from the other node (shared store).
  assert.equal((await b.api(`/api/jobs/${job.id}`)).body.job.id, job.id);

  const oracle = new RingOracle();
  const sims = [a, b, a, b].map((n) => new SimVolunteer({ url: n.url, oracle }));
  for (const s of sims) await s.connected();
  for (const s of sims) s.holdRounds = true;
  for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
  const round = await waitFor('round:begin on both nodes', () => {
    const seen = sims.map((s) => s.events.find((e) => e.name === 'round:begin')?.payload as RoundBegin | undefined);
    return seen.every(Boolean) ? seen[0] : null;
  }, 15_000);
  assert.equal(round.members.length, 4);

  // Signal from a volunteer on node b to its ring neighbour, wherever that one is connected.
  const byId = new Map(sims.map((s) => [s.volunteerId, s]));
  const ring = round.members.map((id) => byId.get(id)!);
  const fromB = ring.findIndex((s) => sims.indexOf(s) % 2 === 1);
  const sender = ring[fromB], receiver = ring[(fromB + 1) % 4];
  const ack = await sender.emit('signal', { jobId: job.id, roundId: round.roundId, to: receiver.volunteerId, data: { candidate: 'c1' } });
  assert.deepEqual(ack, { ok: true });
  const got = await waitFor('signal relayed', () => receiver.events.find((e) => e.name === 'signal')?.payload as { from: string } | undefined);
  assert.equal(got.from, sender.volunteerId);
  const notNeighbour = await sender.emit('signal', { jobId: job.id, roundId: round.roundId, to: ring[(fromB + 2) % 4].volunteerId, data: {} });
  assert.equal(!notNeighbour.ok && notNeighbour.error.code, 'not_neighbour');

  for (const s of sims) {
    s.holdRounds = false;
    s.releaseRound();
  }
  await waitFor('3 syncs on both nodes', () => sims.every((s) => s.committed.length >= 3), 20_000);
  for (const seq of [1, 2, 3]) assert.equal(new Set(sims.map((s) => checksumOf(s.applied.get(seq)!))).size, 1, `sync ${seq}`);
  const rounds = (await b.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { outcome: string }[];
  assert.ok(rounds.filter((r) => r.outcome === 'committed').length >= 3, 'rounds recorded in the shared store');
  for (const s of sims) s.close();
});

test('lean members on the other node: a star round\'s binary mean and the round events reach them over the volunteer bus', async () => {
  const [a, b] = nodes;
  const job = await a.createJob({ preset: 'cnn-fashion', minWorkers: 3, maxWorkers: 3, trust: 'trusted' });
  const oracle = new RingOracle();
  // Two lean members on node b, one Socket.IO member on node a, which coordinates the job.
  const sims = [b, b, a].map((n, i) => new SimVolunteer({ url: n.url, oracle, endpoint: i < 2 ? 'lean' : 'socket.io' }));
  for (const s of sims) await s.connected();
  let failed = false;
  sims[0].failRound = (r) => (r.mode === 'ring' && !failed ? ((failed = true), 'unreachable') : null);
  for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
  const star = await waitFor('a star round', () => sims[1].events.map((e) => e.payload as RoundBegin).find((p) => p?.mode === 'star'), 15_000);
  await waitFor('the star round commits on both nodes', () => sims.every((s) => s.applied.has(star.seq)), 20_000);
  assert.equal(new Set(sims.map((s) => checksumOf(s.applied.get(star.seq)!))).size, 1);
  const result = sims[0].events.find((e) => e.name === 'star:result')?.payload as { data: Uint8Array } | undefined;
  assert.ok(result && result.data.byteLength > 0, 'the binary mean reached a lean member on the other node');
  for (const s of sims) s.close();
});

test('a Moshpit job with members on two nodes: each sync\'s groups (a 4 × 2 grid) span the nodes, commit alone, and agree inside', async () => {
  const [a, b] = nodes;
  const job = await b.createJob({ minWorkers: 8, maxWorkers: 8, trust: 'trusted', groupSize: 4 });
  const oracle = new RingOracle();
  const sims = Array.from({ length: 8 }, (_, i) => new SimVolunteer({ url: (i % 2 ? b : a).url, oracle }));
  for (const s of sims) await s.connected();
  for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
  await waitFor('3 syncs on both nodes', () => sims.every((s) => s.committed.length >= 3), 30_000);
  const onA = new Set(sims.filter((_, i) => i % 2 === 0).map((s) => s.volunteerId));
  for (const seq of [1, 2, 3]) {
    const groups = new Map<number, SimVolunteer[]>();
    for (const s of sims) {
      const begin = s.events.find((e) => e.name === 'round:begin' && (e.payload as RoundBegin).seq === seq)!.payload as RoundBegin;
      assert.equal(begin.grouped, true);
      groups.set(begin.roundId, [...(groups.get(begin.roundId) ?? []), s]);
    }
    // Eight members on a 4 × 2 grid: odd syncs average along the axis of 4 (two groups), even ones along the axis of 2 (four).
    assert.equal(groups.size, seq % 2 ? 2 : 4, `sync ${seq}: ${groups.size} groups`);
    for (const members of groups.values()) assert.equal(new Set(members.map((s) => checksumOf(s.applied.get(seq)!))).size, 1, `sync ${seq}: one model per group`);
    assert.ok([...groups.values()].some((g) => g.some((s) => onA.has(s.volunteerId)) && g.some((s) => !onA.has(s.volunteerId))), `sync ${seq}: a group spans both nodes`);
  }
  const rounds = (await a.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { seq: number; outcome: string; detail: string }[];
  assert.deepEqual(rounds.filter((r) => r.seq <= 3).map((r) => [r.seq, r.outcome, r.detail]), [
    [1, 'committed', '2 of 2 groups committed'],
    [2, 'committed', '4 of 4 groups committed'],
    [3, 'committed', '2 of 2 groups committed'],
  ]);
  for (const s of sims) s.close();
  await b.api(`/api/jobs/${job.id}/stop`, { method: 'POST' }).catch(() => {});
});

test('a job whose node goes away is adopted by the other node', async () => {
  const [a, b] = nodes;
  const job = await b.createJob({ minWorkers: 1, maxWorkers: 2 });
  await b.stop();
  nodes = [a];
  const oracle = new RingOracle();
  const s = new SimVolunteer({ url: a.url, oracle });
  await s.connected();
  const ack = await waitFor('node a takes the job over', async () => {
    const r = await s.request(job.id);
    return r.ok ? r : null;
  }, 30_000, 500);
  assert.equal(ack.ok, true);
  await waitFor('rounds on the adopted job', () => s.committed.length >= 2, 15_000);
  s.close();
});
