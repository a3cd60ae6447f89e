// Through the real server and simulated volunteers: a member gets its ICE servers (STUN, and TURN with
// its own credentials) with its assignment and fresh credentials at 2/3 of their lifetime; a member
// evicted for a fault gets no more, nor does one kept out when it asks again; the shared secret is in
// nothing a volunteer receives and nowhere in the server's log. The server runs on fake time, so the
// hour-long lifetime passes at once.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import type { Assignment, IceServer } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { waitFor, type SimVolunteer } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

const SECRET = 'turn-secret-never-shown-0123456789';
const LIFETIME_S = 3600;
const clock = new FakeClock(Date.now());
let server: TestServer | null = null;
after(() => server?.stop());

const refreshes = (s: SimVolunteer) => s.events.filter((e) => e.name === 'ice:refresh').map((e) => e.payload as { jobId: string; iceServers: IceServer[] });
const turnOf = (servers: IceServer[] | undefined) => servers?.find((s) => s.urls[0].startsWith('turn:'));
const endReason = (s: SimVolunteer) => (s.events.find((e) => e.name === 'job:end')?.payload as { reason: string } | undefined)?.reason;

test('members get ICE servers with their job and renewed TURN credentials; the evicted and the kept out get none', { timeout: 60_000 }, async () => {
  server = await startTestServer({
    clock, timing: { roundTimeoutMs: 36_000_000, barrierTimeoutMs: 36_000_000, loadTimeoutMs: 5_000 },
    ice: { stun: ['stun:127.0.0.1:3478'], turn: ['turn:127.0.0.1:3478?transport=udp'], turnSecret: SECRET, credentialLifetimeS: LIFETIME_S },
  });
  // Three workers needed: no round begins, only joins and loads.
  const job = await server.createJob({ minWorkers: 3, maxWorkers: 4 });
  const honest = await server.volunteer({ clientId: 'honest-client-0001' });
  const staller = await server.volunteer({ clientId: 'staller-client-001' });
  staller.holdLoad = true;
  const issuedAtS = Math.floor(clock.now() / 1000);
  for (const v of [honest, staller]) assert.equal((await v.request(job.id)).ok, true);
  await waitFor('both assigned and the honest one loaded', () => honest.loadedFrom.length === 1 && staller.loadedFrom.length === 1);
  const workers = async () => (await server!.api(`/api/jobs/${job.id}`)).body.workers as { volunteerId: string; state: string }[];
  await waitFor('the honest member is admitted', async () => {
    const row = (await workers()).find((w) => w.volunteerId === honest.volunteerId);
    return row && row.state !== 'loading';
  });

  for (const v of [honest, staller]) {
    const a = v.assignment as Assignment;
    assert.deepEqual(a.iceServers?.[0], { urls: ['stun:127.0.0.1:3478'] });
    const turn = turnOf(a.iceServers)!;
    assert.deepEqual(turn.urls, ['turn:127.0.0.1:3478?transport=udp']);
    assert.equal(turn.username, `${issuedAtS + LIFETIME_S}:${v.volunteerId}`);
    assert.match(turn.credential!, /^[A-Za-z0-9+/]{27}=$/);
  }

  // The staller never reports its model: evicted at the load timeout, and kept out when it asks again.
  await clock.advance(5_000);
  await waitFor('the staller is evicted', () => endReason(staller));
  assert.match(endReason(staller)!, /model load timed out/);
  const again = await staller.request(job.id);
  assert.equal(!again.ok && again.error.code, 'rate_limited', JSON.stringify(again));

  // Just before 2/3 of the lifetime nothing is renewed; at it, the member gets fresh credentials.
  const renewAtMs = (LIFETIME_S * 1000 * 2) / 3;
  await clock.advance(renewAtMs - 5_000 - 1);
  assert.equal(refreshes(honest).length, 0);
  await clock.advance(1);
  await waitFor('the first renewal', () => refreshes(honest).length === 1);
  const first = refreshes(honest)[0];
  assert.equal(first.jobId, job.id);
  assert.equal(turnOf(first.iceServers)!.username, `${issuedAtS + renewAtMs / 1000 + LIFETIME_S}:${honest.volunteerId}`);
  assert.notEqual(turnOf(first.iceServers)!.credential, turnOf(honest.assignment!.iceServers)!.credential);
  await clock.advance(renewAtMs);
  await waitFor('the second renewal', () => refreshes(honest).length === 2);

  // Nothing for the evicted member, however long it waits (its assignment's credentials have expired).
  await clock.advance(2 * LIFETIME_S * 1000);
  await waitFor('renewals go on for the member', () => refreshes(honest).length >= 4);
  assert.equal(refreshes(staller).length, 0);
  assert.equal(staller.events.filter((e) => e.name === 'job:assign').length, 1, 'the kept-out staller was not assigned again');

  // The secret: in no event either volunteer received, nor in the server's log.
  for (const v of [honest, staller]) assert.ok(!JSON.stringify(v.events).includes(SECRET));
  const log = server.logTail(10_000);
  assert.match(log, /ICE servers for volunteers' peer links: stun:127\.0\.0\.1:3478, turn:127\.0\.0\.1:3478\?transport=udp \(credentials valid 3600 s\)/);
  assert.ok(!log.includes(SECRET));
});
