// The server terminating TLS itself: https:// answers over HTTP/1.1 to a client trusting the private
// CA and is refused by one that does not; Socket.IO connects over wss:// directly and upgrades from
// polling to WebSocket over TLS; a key that does not match the certificate stops the start.
import assert from 'node:assert/strict';
import { get } from 'node:https';
import { after, before, test } from 'node:test';
import { NAMESPACES, PROTOCOL_VERSION } from '@tabfleet/protocol';
import { io, type Socket } from 'socket.io-client';
import { SIM_CAPABILITIES, waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';
import { makeTestCa, type IssuedCertificate, type TestCa } from '../src/testing/test-ca';
import { startServer } from '../src/app';

let ca: TestCa;
let cert: IssuedCertificate;
let server: TestServer;
before(async () => {
  ca = await makeTestCa();
  cert = await ca.issue({ dns: ['localhost'], ip: ['127.0.0.1'] });
  server = await startTestServer({ tls: { cert: cert.cert, key: cert.key } });
});
after(async () => {
  await server.stop();
  ca.remove();
});

function fetchOverTls(path: string, trust: string | undefined): Promise<{ status: number; httpVersion: string; body: string }> {
  return new Promise((resolve, reject) => {
    get(`${server.url}${path}`, { ca: trust, headers: { authorization: 'Bearer test-token' }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d) => (body += d)).on('end', () => resolve({ status: res.statusCode ?? 0, httpVersion: res.httpVersion, body }));
    }).on('error', reject);
  });
}

test('https:// answers a client that trusts the CA over HTTP/1.1, and one that does not is refused', async () => {
  assert.match(server.url, /^https:\/\/127\.0\.0\.1:\d+$/);
  const ok = await fetchOverTls('/api/jobs', ca.ca);
  assert.equal(ok.status, 200, ok.body);
  assert.equal(ok.httpVersion, '1.1');
  assert.deepEqual(JSON.parse(ok.body).jobs, []);
  await assert.rejects(fetchOverTls('/api/jobs', undefined), (e: NodeJS.ErrnoException) => e.code === 'UNABLE_TO_VERIFY_LEAF_SIGNATURE');
});

function volunteer(transports: ('polling' | 'websocket')[]): Promise<Socket> {
  const socket = io(`${server.url}${NAMESPACES.volunteer}`, { auth: { protocol: PROTOCOL_VERSION, capabilities: SIM_CAPABILITIES }, transports, ca: ca.ca, reconnection: false });
  return new Promise((resolve, reject) => {
    socket.once('welcome', () => resolve(socket));
    socket.once('connect_error', (e) => reject(e));
  });
}

test('Socket.IO over TLS: wss:// directly, and polling upgraded to WebSocket', async () => {
  const direct = await volunteer(['websocket']);
  const upgraded = await volunteer(['polling', 'websocket']);
  try {
    await waitFor('the polling connection upgraded', () => upgraded.io.engine.transport.name === 'websocket', 10_000, 50);
    assert.equal(direct.io.engine.transport.name, 'websocket');
    await waitFor('both volunteers seen by the server', () => server.io.of(NAMESPACES.volunteer).sockets.size === 2, 10_000, 50);
  } finally {
    direct.close();
    upgraded.close();
  }
});

test('a key that is not the certificate’s, or text that is not PEM, stops startServer with a clear error', async () => {
  const other = await ca.issue({ ip: ['127.0.0.1'] });
  await assert.rejects(startServer({ port: 0, dataDir: ca.dir, token: 'test-token-0123456789', tls: { cert: cert.cert, key: other.key }, log: () => {} }),
    /the key does not belong to the certificate \(CN=localhost\)/);
  await assert.rejects(startServer({ port: 0, dataDir: ca.dir, token: 'test-token-0123456789', tls: { cert: 'not a certificate', key: cert.key }, log: () => {} }),
    /the certificate is not a PEM certificate/);
});
