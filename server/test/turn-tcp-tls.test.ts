// For networks that drop UDP: a real coturn listening on UDP, TCP and TLS (a certificate from a test
// CA), and a server configured with all three URLs hands a volunteer one TURN entry naming them with
// one set of credentials, which coturn accepts on each transport. A TLS client that does not trust the
// test CA is turned away by the handshake, so the TLS port is really TLS. Only 127.0.0.1.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startCoturn, type Coturn } from '../src/testing/coturn';
import { turnAllocate } from '../src/testing/turn-client';
import { makeTestCa, type TestCa } from '../src/testing/test-ca';
import { startTestServer, type TestServer } from '../src/testing/test-server';

const SECRET = 'tcp-tls-shared-secret-0123456789';
let ca: TestCa;
let coturn: Coturn;
let server: TestServer;
before(async () => {
  ca = await makeTestCa();
  const cert = await ca.issue({ ip: ['127.0.0.1'] });
  coturn = await startCoturn(SECRET, { tls: { cert: cert.certPath, key: cert.keyPath } });
  server = await startTestServer({ ice: { turn: [coturn.url, coturn.tcpUrl, coturn.tlsUrl!], turnSecret: SECRET } });
});
after(async () => {
  await server?.stop();
  coturn?.stop();
  ca?.remove();
});

test('one set of TURN credentials, with UDP, TCP and TLS URLs, allocates a relay over each', { timeout: 120_000 }, async () => {
  const job = await server.createJob({ minWorkers: 3, maxWorkers: 4 });
  const v = await server.volunteer();
  assert.equal((await v.request(job.id)).ok, true);
  const turn = v.assignment?.iceServers?.filter((s) => s.urls.some((u) => u.startsWith('turn')));
  assert.equal(turn?.length, 1, JSON.stringify(v.assignment?.iceServers));
  assert.deepEqual(turn[0].urls, [coturn.url, coturn.tcpUrl, coturn.tlsUrl]);
  const { username, credential } = turn[0] as { username: string; credential: string };
  const why = () => `coturn's log:\n${coturn.log().slice(-3000)}`;
  const tlsPort = Number(new URL(coturn.tlsUrl!.replace('turns:', 'turns://')).port);
  assert.deepEqual(await turnAllocate(coturn.port, username, credential), { code: 0, relayed: true }, why());
  assert.deepEqual(await turnAllocate(coturn.port, username, credential, { transport: 'tcp' }), { code: 0, relayed: true }, why());
  assert.deepEqual(await turnAllocate(tlsPort, username, credential, { transport: 'tls', ca: ca.ca }), { code: 0, relayed: true }, why());
  // Forged credentials are refused on the stream transports too.
  assert.equal((await turnAllocate(coturn.port, username, 'forged', { transport: 'tcp' })).code, 401, why());
  await assert.rejects(turnAllocate(tlsPort, username, credential, { transport: 'tls' }), /self[- ]signed|unable to verify|certificate/i);
});
