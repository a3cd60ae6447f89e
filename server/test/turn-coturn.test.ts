// Against a real coturn (Debian's `coturn`, REST-API mode with the server's shared secret): the TURN
// credentials the server hands a volunteer with its job get a relay allocated; the same credentials
// signed with another secret, or handed out by a server whose clock says they expired, are refused
// with 401. The TURN client is server/src/testing/turn-client.ts (what an ICE agent sends); only 127.0.0.1.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import type { IceServer } from '@tabfleet/protocol';
import { startCoturn, type Coturn } from '../src/testing/coturn';
import { turnAllocate } from '../src/testing/turn-client';
import { turnCredentials } from '../src/ice';
import { waitFor } from '../src/testing/sim-volunteer';
import { skippableClock, startTestServer, type TestServer } from '../src/testing/test-server';

const SECRET = 'coturn-shared-secret-for-the-test';
let coturn: Coturn | null = null;
let server: TestServer | null = null;
after(async () => {
  await server?.stop();
  coturn?.stop();
});

test('coturn accepts the TURN credentials the server issued, and refuses forged and expired ones (401)', { timeout: 120_000 }, async () => {
  coturn = await startCoturn(SECRET);
  const time = skippableClock();
  server = await startTestServer({ clock: time.clock, ice: { turn: [coturn.url], turnSecret: SECRET } });
  const job = await server.createJob({ minWorkers: 3, maxWorkers: 4 });
  const turnOf = async (): Promise<IceServer & { username: string; credential: string }> => {
    const v = await server!.volunteer();
    assert.equal((await v.request(job.id)).ok, true);
    const turn = v.assignment?.iceServers?.find((s) => s.urls.includes(coturn!.url));
    assert.ok(turn?.username && turn.credential, JSON.stringify(v.assignment?.iceServers));
    return turn as IceServer & { username: string; credential: string };
  };
  const why = () => `coturn's log:\n${coturn!.log().slice(-3000)}`;

  const issued = await turnOf();
  assert.deepEqual(await turnAllocate(coturn.port, issued.username, issued.credential), { code: 0, relayed: true }, why());

  // Forged: signed with another secret, or another volunteer's name on this one's password.
  const forged = turnCredentials('not-the-shared-secret', issued.username.split(':')[1], Number(issued.username.split(':')[0]));
  assert.equal((await turnAllocate(coturn.port, forged.username, forged.credential)).code, 401, why());
  const [expiry] = issued.username.split(':');
  assert.equal((await turnAllocate(coturn.port, `${expiry}:v-someone-else`, issued.credential)).code, 401, why());

  // Expired: the server's clock two hours back issues credentials that ran out an hour ago.
  time.skip(-2 * 3600_000);
  const stale = await turnOf();
  assert.ok(Number(stale.username.split(':')[0]) < Date.now() / 1000, stale.username);
  assert.equal((await turnAllocate(coturn.port, stale.username, stale.credential)).code, 401, why());
  // coturn's own word for it (its log is read as it comes, so waited for).
  await waitFor('coturn logs the refusal', () => coturn!.log().includes(`user <${stale.username}>: incoming packet message processed, error 401`));
});
