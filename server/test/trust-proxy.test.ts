// Whose address a connection counts as: its TCP peer, unless that peer is a --trust-proxy address, and
// then the nearest untrusted address in X-Forwarded-For, read from the right. A client that writes the
// header itself on a server without --trust-proxy (the default), or from an address not trusted,
// changes nothing. Seen through the per-address volunteer cap (one connection per address here).
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { NAMESPACES, PROTOCOL_VERSION } from '@tabfleet/protocol';
import { io, type Socket } from 'socket.io-client';
import { SIM_CAPABILITIES } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

const servers: TestServer[] = [];
const sockets: Socket[] = [];
after(async () => {
  for (const s of sockets) s.close();
  for (const s of servers) await s.stop();
});

/** A volunteer connection from `from` (a loopback address) with this X-Forwarded-For: null when welcomed, else why it was refused. */
function connect(server: TestServer, forwardedFor: string, from = '127.0.0.1'): Promise<string | null> {
  const socket = io(`${server.url}${NAMESPACES.volunteer}`, {
    auth: { protocol: PROTOCOL_VERSION, capabilities: SIM_CAPABILITIES }, transports: ['websocket'], reconnection: false,
    extraHeaders: { 'x-forwarded-for': forwardedFor }, localAddress: from,
  } as Parameters<typeof io>[1]);
  sockets.push(socket);
  return new Promise((resolve) => {
    socket.once('welcome', () => resolve(null));
    socket.once('connect_error', (e) => resolve((e as Error & { data?: { code: string } }).data?.code ?? e.message));
  });
}

test('without --trust-proxy a client’s own X-Forwarded-For is ignored: two connections from one address, the second refused', async () => {
  const server = await startTestServer({ addressLimits: { connections: 1, jobShare: 1 } });
  servers.push(server);
  assert.equal(await connect(server, '198.51.100.1'), null);
  assert.equal(await connect(server, '198.51.100.2'), 'rate_limited');
});

test('behind a trusted proxy each forwarded address is its own, read from the right; an untrusted peer is itself', async () => {
  const server = await startTestServer({ addressLimits: { connections: 1, jobShare: 1 }, trustProxy: ['127.0.0.1'] });
  servers.push(server);
  assert.equal(await connect(server, '198.51.100.1'), null);
  // What the client wrote sits at the left; the proxy appended the address it saw.
  assert.equal(await connect(server, '198.51.100.1, 198.51.100.2'), null);
  assert.equal(await connect(server, '198.51.100.9, 198.51.100.1'), 'rate_limited', '198.51.100.1 holds its one connection');
  // A proxy chain: trusted hops on the right are skipped to the client.
  assert.equal(await connect(server, '198.51.100.3, 127.0.0.1'), null);
  // 127.0.0.2 is not a trusted proxy: its header counts for nothing, the peer is the address.
  assert.equal(await connect(server, '198.51.100.4', '127.0.0.2'), null);
  assert.equal(await connect(server, '198.51.100.5', '127.0.0.2'), 'rate_limited');
});

test('bad --trust-proxy values stop startServer', async () => {
  await assert.rejects(startTestServer({ trustProxy: ['proxy.example.org'] }), /--trust-proxy "proxy\.example\.org": want the proxy's IP address/);
});
