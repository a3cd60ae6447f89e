// A joiner is told which members hold the model it loads (issue 38: loading from peers): the server
// names two of them and the model's agreed digest in `model:load`, tells them to expect the link, and
// relays the WebRTC signaling between the joiner and those two only. What the joiner loaded, and from
// where, is counted in /metrics once the server has checked its digest. Moshpit joiners are named no
// one: their groups' models differ.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { modelDigest, PROBE_ROUND_ID } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { parseSamples, sampleValue } from '../src/testing/exposition';
import { waitFor, type SimVolunteer } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

interface Load { seq: number; url: string | null; peers?: string[]; digest?: string }
const loadOf = (v: SimVolunteer) => waitFor('model:load', () => v.events.find((e) => e.name === 'model:load')?.payload as Load | undefined, 10_000);

test('a joiner is named two members that hold its model, may signal those only, and its load from one is counted', async (t) => {
  // The server's timers on a fake clock, so neither the barrier's hold for the joiner nor its load
  // deadline can run out while this test checks its links; and the members stop at the barrier before
  // the joiner comes, so no sync commits while it loads (a commit moves a joiner's load on). Beside a
  // CPU-bound process its report was once refused (stale_round: was not asked to load the model of
  // sync 3); which event moved its load then was not seen (the server defers a joiner's load while a
  // round runs, so it was not simply a round in flight), but with neither timers nor commits left
  // only a reload could.
  const server = await startTestServer({ clock: new FakeClock(Date.now()) });
  t.after(() => server.stop());
  const job = await server.createJob({ minWorkers: 3, maxWorkers: 4, checkpointEvery: 1 });
  const early = await Promise.all([0, 1, 2].map(() => server.volunteer({ trainMs: 20 })));
  for (const s of early) await s.request(job.id);
  // The first members load the seed: there is no member to load it from.
  for (const s of early) assert.deepEqual(Object.keys(await loadOf(s)).sort(), ['jobId', 'seq', 'step', 'url']);
  await waitFor('2 syncs and their checkpoint', async () => early.every((s) => s.committed.length >= 2) && (await server.api(`/api/jobs/${job.id}`)).body.job.latestCheckpoint?.seq >= 2);
  await quiesce(server, job.id, early);

  const late = await server.volunteer({ trainMs: 20 });
  late.holdLoad = true;
  assert.equal((await late.request(job.id)).ok, true);
  const load = await loadOf(late);
  assert.ok(load.url && load.peers && load.digest, JSON.stringify(load));
  assert.equal(load.peers.length, 2);
  const named = early.filter((s) => load.peers!.includes(s.volunteerId));
  assert.equal(named.length, 2, 'the named peers are members');
  await waitFor('the model the joiner loads', () => early[0].applied.has(load.seq));
  assert.equal(load.digest, modelDigest(early[0].applied.get(load.seq)!), 'the digest is that of the model the members applied at that sync');
  for (const s of named) {
    await waitFor('the named member is told to expect the link', () => s.events.some((e) => e.name === 'peers:probe' && (e.payload as { peer: string }).peer === late.volunteerId));
  }

  // Signaling is relayed between the joiner and a named member, both ways, and refused with the other.
  const other = early.find((s) => !load.peers!.includes(s.volunteerId))!;
  assert.equal((await late.emit('signal', { jobId: job.id, roundId: PROBE_ROUND_ID, to: named[0].volunteerId, data: { offer: 1 } })).ok, true);
  assert.equal((await named[0].emit('signal', { jobId: job.id, roundId: PROBE_ROUND_ID, to: late.volunteerId, data: { answer: 1 } })).ok, true);
  await waitFor('the signal reached the named member', () => named[0].events.some((e) => e.name === 'signal' && (e.payload as { from: string }).from === late.volunteerId));
  const refused = await late.emit('signal', { jobId: job.id, roundId: PROBE_ROUND_ID, to: other.volunteerId, data: { offer: 1 } });
  assert.equal(refused.ok, false);
  assert.ok(!refused.ok && refused.error.code === 'not_neighbour', JSON.stringify(refused));

  // The joiner says it loaded the model from a named member: admitted (its digest is the agreed one), and counted.
  const ack = await late.emit('model:loaded', { jobId: job.id, seq: load.seq, checksum: load.digest!, from: { peer: named[1].volunteerId } });
  assert.ok(ack.ok && ack.admitted, `${JSON.stringify(ack)}\nthe server's last log lines:\n${server.logTail(40)}`);
  const samples = parseSamples(await (await fetch(`${server.url}/metrics`)).text());
  assert.equal(sampleValue(samples, 'tabfleet_job_model_loads_total', { job_id: job.id, source: 'peer' }), 1);
  assert.equal(sampleValue(samples, 'tabfleet_job_model_loads_total', { job_id: job.id, source: 'server' }), 3);
  await server.api(`/api/jobs/${job.id}/stop`, { method: 'POST' });
});

/**
 * Stops `members` at the barrier and waits until no round of the job is running: none can begin after
 * (a ready sent before the hold reaches the server before each member's acknowledged emit below).
 */
async function quiesce(server: TestServer, jobId: string, members: SimVolunteer[]): Promise<void> {
  for (const s of members) s.holdReady = true;
  for (const s of members) await s.emit('signal', { jobId, roundId: PROBE_ROUND_ID, to: s.volunteerId, data: {} });
  await waitFor('no round running', async () => {
    const rounds = (await server.api(`/api/jobs/${jobId}/rounds`)).body.rounds as { outcome: string }[];
    return rounds.every((r) => r.outcome !== 'running');
  });
}

test('a Moshpit joiner is named no members to load from: their groups\' models differ', async () => {
  const job = await server.createJob({ minWorkers: 2, maxWorkers: 3, checkpointEvery: 1, groupSize: 2, H: 2 });
  const early = await Promise.all([0, 1].map(() => server.volunteer({ trainMs: 20 })));
  for (const s of early) await s.request(job.id);
  await waitFor('a checkpoint', async () => (await server.api(`/api/jobs/${job.id}`)).body.job.latestCheckpoint?.seq >= 1);
  const late = await server.volunteer({ trainMs: 20 });
  assert.equal((await late.request(job.id)).ok, true);
  const load = await loadOf(late);
  assert.ok(load.url, JSON.stringify(load));
  assert.equal(load.peers, undefined);
  assert.equal(load.digest, undefined);
  await server.api(`/api/jobs/${job.id}/stop`, { method: 'POST' });
});
