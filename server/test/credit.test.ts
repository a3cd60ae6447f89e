// Volunteer credit: a browser's client id is one volunteer across reconnects and jobs, its totals are
// what the server counted (committed syncs × H × batch size), not what the volunteer claimed, and a
// job's contributors are public without the researcher token. Bad display names change nothing.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { NAMESPACES, PROTOCOL_VERSION, type Ack, type PublicContributors, type RoundBegin } from '@tabfleet/protocol';
import { io } from 'socket.io-client';
import { SIM_CAPABILITIES, waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

// H 3 and batch 10: 30 samples a sync, where every simulated result claims 32. Fixed pacing: a paced
// (or auto) job's first sync does an eighth of H, and later ones follow each member's pace.
const JOB = { H: 3, pacing: 'fixed', hyperparameters: { lr: 0.1, batchSize: 10 }, minWorkers: 2, maxWorkers: 2, checkpointEvery: 2 } as const;
const ADA = 'ada-browser-0123456789abcdef';

async function publicContributors(jobId: string): Promise<PublicContributors> {
  await server.hub.flushed();
  const res = await fetch(`${server.url}/api/public/jobs/${jobId}/contributors`); // no token
  assert.equal(res.status, 200);
  return res.json();
}

async function committedRoundsWith(jobId: string, volunteerIds: string[]): Promise<number> {
  const rounds = (await server.api(`/api/jobs/${jobId}/rounds`)).body.rounds as { outcome: string; members: string[] }[];
  return rounds.filter((r) => r.outcome === 'committed' && r.members.some((m) => volunteerIds.includes(m))).length;
}

test('a reconnect with the same client id is the same volunteer, credited for what the server saw', async () => {
  // minWorkers 1: Bob trains on while Ada is away. (With fewer admitted members than minWorkers and
  // no checkpoint of the last sync, a joiner waits forever: a coordinator gap reported separately.)
  // 100 ms of "training" a sync leaves time to reconnect before the job ends.
  const job = await server.createJob({ ...JOB, minWorkers: 1, targetSteps: 30 });
  const first = await server.volunteer({ clientId: ADA, displayName: 'Ada L.', trainMs: 100 });
  const bob = await server.volunteer({ clientId: 'bob-browser-0123456789abcdef', trainMs: 100 });
  await first.request(job.id);
  await bob.request(job.id);
  await waitFor('two syncs committed', () => first.committed.length >= 2);
  const firstId = first.volunteerId;
  first.close();
  // Same browser, new connection: a new volunteer id, the same identity.
  const again = await server.volunteer({ clientId: ADA, trainMs: 100 });
  assert.notEqual(again.volunteerId, firstId);
  await again.request(job.id);
  await waitFor('the job finishes', async () => (await server.api(`/api/jobs/${job.id}`)).body.job.state === 'done', 20_000, 50);

  const { contributors } = await publicContributors(job.id);
  assert.equal(contributors.length, 2, JSON.stringify(contributors));
  const ada = contributors.find((c) => c.name === 'Ada L.')!;
  assert.ok(ada, 'the display name from the first handshake is kept for the reconnect');
  const syncs = await committedRoundsWith(job.id, [firstId, again.volunteerId]);
  assert.ok(syncs > first.committed.length, 'credited in both sessions');
  assert.equal(ada.syncs, syncs, 'one entry holding both sessions');
  assert.equal(ada.samples, syncs * 3 * 10, 'samples: syncs × H × batch size, not the 32 per result the volunteer claimed');
  const bobRow = contributors.find((c) => c.name !== 'Ada L.')!;
  assert.match(bobRow.name, /^volunteer [0-9a-f]{8}$/, 'no name: a short id derived from the client id');
  assert.equal(bobRow.named, false);
  assert.equal(bobRow.syncs, await committedRoundsWith(job.id, [bob.volunteerId]));
  assert.ok(!JSON.stringify(contributors).includes('browser-0123'), 'client ids never appear on the public page');
  assert.ok(ada.computeMs >= 0 && ada.lastAt >= ada.firstAt);

  // Its own totals, over all jobs, asked for with the id in the body.
  const credit = await (await fetch(`${server.url}/api/public/credit`, { method: 'POST', body: JSON.stringify({ clientId: ADA }) })).json();
  assert.deepEqual(credit.credit, { displayName: 'Ada L.', jobs: 1, samples: ada.samples, syncs: ada.syncs, computeMs: ada.computeMs });
  const unknown = await (await fetch(`${server.url}/api/public/credit`, { method: 'POST', body: JSON.stringify({ clientId: 'nobody-0123456789abcdef' }) })).json();
  assert.equal(unknown.credit, null);

  // Totals survive into the next job under the same id.
  const next = await server.createJob({ ...JOB, targetSteps: 9 });
  const third = await server.volunteer({ clientId: ADA });
  const carol = await server.volunteer();
  await third.request(next.id);
  await carol.request(next.id);
  await waitFor('the second job finishes', async () => (await server.api(`/api/jobs/${next.id}`)).body.job.state === 'done', 20_000, 50);
  await server.hub.flushed();
  const total = (await (await fetch(`${server.url}/api/public/credit`, { method: 'POST', body: JSON.stringify({ clientId: ADA }) })).json()).credit;
  const inNext = await committedRoundsWith(next.id, [third.volunteerId]);
  assert.equal(total.jobs, 2);
  assert.equal(total.syncs, ada.syncs + inNext);
  assert.equal(total.samples, (ada.syncs + inNext) * 30);
});

test('a star round credits its members the same way', async () => {
  const job = await server.createJob({ ...JOB, targetSteps: 6 });
  const a = await server.volunteer({ clientId: 'star-a-0123456789abcdef' });
  const b = await server.volunteer({ clientId: 'star-b-0123456789abcdef' });
  for (const s of [a, b]) s.failRound = (r: RoundBegin) => (r.mode !== 'star' ? 'unreachable' : null);
  await a.request(job.id);
  await b.request(job.id);
  await waitFor('the job finishes through the server', async () => (await server.api(`/api/jobs/${job.id}`)).body.job.state === 'done', 20_000, 50);
  const { contributors } = await publicContributors(job.id);
  const rounds = (await server.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { outcome: string; mode: string }[];
  assert.ok(rounds.some((r) => r.outcome === 'committed' && r.mode === 'star'));
  const committed = rounds.filter((r) => r.outcome === 'committed').length;
  assert.deepEqual(contributors.map((c) => [c.syncs, c.samples]), [[committed, committed * 30], [committed, committed * 30]]);
});

test('a bad display name is refused with a clear error and changes nothing', async () => {
  await server.hub.flushed();
  const before = await server.store.digest();
  for (const [displayName, message] of [['<script>', /displayName: letters, digits/], ['x'.repeat(41), /displayName: at most 40/], ['   ', /displayName: must not be empty/]] as const) {
    const s = io(`${server.url}${NAMESPACES.volunteer}`, {
      auth: { protocol: PROTOCOL_VERSION, capabilities: SIM_CAPABILITIES, clientId: 'evil-0123456789abcdef', displayName },
      transports: ['websocket'],
      reconnection: false,
    });
    const err = await new Promise<Error & { data?: { code: string } }>((resolve) => s.once('connect_error', resolve));
    s.close();
    assert.equal(err.data?.code, 'bad_request');
    assert.match(err.message, message);
  }
  // A name needs a client id to be kept under; a short client id is refused too.
  for (const auth of [{ displayName: 'Ada' }, { clientId: 'short' }]) {
    const s = io(`${server.url}${NAMESPACES.volunteer}`, { auth: { protocol: PROTOCOL_VERSION, capabilities: SIM_CAPABILITIES, ...auth }, transports: ['websocket'], reconnection: false });
    const err = await new Promise<Error & { data?: { code: string } }>((resolve) => s.once('connect_error', resolve));
    s.close();
    assert.equal(err.data?.code, 'bad_request', err.message);
  }
  const v = await server.volunteer({ clientId: 'grace-0123456789abcdef' });
  const ack = (await v.emit('profile', { displayName: 'Grace\u0000Hopper' } as never)) as Ack;
  assert.equal(!ack.ok && ack.error.code, 'bad_request');
  const badCredit = await fetch(`${server.url}/api/public/credit`, { method: 'POST', body: JSON.stringify({ clientId: '../x' }) });
  assert.equal(badCredit.status, 400);
  assert.match((await badCredit.json()).error.message, /credit request: clientId/);
  assert.equal(await server.store.digest(), before, 'the store changed');

  // A good name is stored under the client id and greets the next connection.
  assert.deepEqual(await v.emit('profile', { displayName: '  Grace Hopper ' }), { ok: true, displayName: 'Grace Hopper' });
  const later = await server.volunteer({ clientId: 'grace-0123456789abcdef' });
  const welcome = later.events.find((e) => e.name === 'welcome')!.payload as { displayName: string | null };
  assert.equal(welcome.displayName, 'Grace Hopper');
  assert.deepEqual(await v.emit('profile', { displayName: null }), { ok: true, displayName: null });
  assert.equal((await server.store.volunteerCredit('grace-0123456789abcdef')), null, 'cleared, and no work yet');
});

test('the contributor list of an unknown or badly named job is refused', async () => {
  assert.equal((await fetch(`${server.url}/api/public/jobs/job-nope/contributors`)).status, 404);
  assert.equal((await fetch(`${server.url}/api/public/jobs/a%20b/contributors`)).status, 400);
});
