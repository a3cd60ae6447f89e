// What a Socket.IO connection meets before any namespace (server/src/sockets/edge.ts), through the real
// server and raw engine connections. Issue 34: connections that never joined a namespace were
// uncapped (20 of them took the server from 121 to 749 MB), and handshakes skipped the per-address
// rate limit (9,000 researcher-token guesses/s on one connection, against 100 requests/s over HTTP).
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { NAMESPACES, PROTOCOL_VERSION } from '@tabfleet/protocol';
import { Manager } from 'socket.io-client';
import { SIM_CAPABILITIES } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

const servers: TestServer[] = [];
after(async () => {
  for (const s of servers) await s.stop();
});
async function serverWith(opts: Parameters<typeof startTestServer>[0]): Promise<TestServer> {
  const s = await startTestServer(opts);
  servers.push(s);
  return s;
}

interface Raw {
  manager: Manager;
  /** Null when the engine connection opened. */
  error: Error | null;
  /** Resolves when the connection closes (at once for one that never opened). */
  closed: Promise<void>;
  /** Socket.IO packets the server sent, as text. */
  received: string[];
}

/** An engine connection with no namespace socket: what socket.io-client opens before its first `io(…)` joins. */
function rawConnection(url: string): Promise<Raw> {
  const manager = new Manager(url, { transports: ['websocket'], reconnection: false, autoConnect: false });
  const received: string[] = [];
  return new Promise((resolve) => manager.open((err) => {
    const closed = err ? Promise.resolve() : new Promise<void>((r) => manager.engine.once('close', () => r()));
    if (!err) manager.engine.on('message', (m) => received.push(String(m)));
    resolve({ manager, error: err ?? null, closed, received });
  }));
}

/** Sends a namespace CONNECT packet on a raw connection and resolves the code of the answer ('connected' or the error's code). */
async function handshake(raw: Raw, namespace: string, auth: object): Promise<string> {
  const from = raw.received.length;
  raw.manager.engine.send(`0${namespace},${JSON.stringify(auth)}`);
  for (let i = 0; i < 500; i++) {
    const reply = raw.received.slice(from).find((m) => m.startsWith(`0${namespace},`) || m.startsWith(`4${namespace},`));
    if (reply) return reply.startsWith('0') ? 'connected' : (JSON.parse(reply.slice(namespace.length + 2)) as { data?: { code?: string } }).data?.code ?? 'no code';
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no answer to a ${namespace} handshake`);
}

const isOpen = (raw: Raw) => raw.error === null && raw.manager.engine?.readyState === 'open';
const waitUntil = async (what: string, ok: () => boolean, ms = 20_000) => {
  for (const t0 = Date.now(); !ok(); await new Promise((r) => setTimeout(r, 20))) if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
};

test('connections that join no namespace: one address holds at most its cap, and each is closed after the grace', { timeout: 60_000 }, async () => {
  // 4 volunteer connections per address: 4 + CONNECTION_SLACK (8) = 12 engine connections.
  const server = await serverWith({ addressLimits: { connections: 4, jobShare: 1 }, joinGraceMs: 1_000 });
  const raws = await Promise.all(Array.from({ length: 20 }, () => rawConnection(server.url)));
  // Handshakes in flight together may all open before the first is counted; those over the cap close at once.
  await new Promise((r) => setTimeout(r, 100));
  const open = raws.filter(isOpen).length;
  assert.ok(open <= 12, `${open} raw connections open from one address`);
  assert.ok(raws.some((r) => r.error !== null || !isOpen(r)), 'some were refused');
  // The raw ones all close after the grace; a volunteer then joins and stays past it.
  await Promise.all(raws.map((r) => r.closed));
  const volunteer = await server.volunteer();
  await new Promise((r) => setTimeout(r, 2_500));
  assert.ok(volunteer.socket.connected, 'a connection with a namespace socket is not closed');
  volunteer.close();
});

test('a connection whose namespace socket left is closed after the grace too', { timeout: 30_000 }, async () => {
  const server = await serverWith({ joinGraceMs: 1_000 });
  const raw = await rawConnection(server.url);
  assert.equal(await handshake(raw, NAMESPACES.volunteer, { protocol: PROTOCOL_VERSION, capabilities: SIM_CAPABILITIES }), 'connected');
  raw.manager.engine.send(`1${NAMESPACES.volunteer},`); // DISCONNECT from the namespace, keeping the connection
  const t0 = Date.now();
  await raw.closed;
  assert.ok(Date.now() - t0 >= 900, 'not before the grace');
});

test('a token-guessing loop on one /dashboard connection gets rate_limited, as HTTP does; so does every handshake after', { timeout: 60_000 }, async () => {
  // A burst of 100: a failed token costs 1 + FAILED_AUTH_COST (10) tokens. A token back every 100 s, so the
  // bucket is still spent at the end however slowly a loaded machine runs the loop (at 1 a second, a fresh
  // clone's run beside a CPU-bound process refilled one before the last check: 200, not 429).
  const server = await serverWith({ httpRateLimit: { perSecond: 0.01, burst: 100 }, joinGraceMs: 30_000 });
  const raw = await rawConnection(server.url);
  const codes = new Map<string, number>();
  for (let i = 0; i < 60; i++) {
    const c = await handshake(raw, NAMESPACES.dashboard, { protocol: PROTOCOL_VERSION, token: `guess-${i}` });
    codes.set(c, (codes.get(c) ?? 0) + 1);
  }
  assert.ok((codes.get('unauthorized') ?? 0) <= 10, `guesses answered: ${JSON.stringify([...codes])}`);
  assert.ok((codes.get('rate_limited') ?? 0) >= 49, JSON.stringify([...codes]));
  // The address's bucket is spent: the right token, a volunteer, a new connection and HTTP all wait.
  assert.equal(await handshake(raw, NAMESPACES.dashboard, { protocol: PROTOCOL_VERSION, token: 'test-token' }), 'rate_limited');
  assert.equal(await handshake(raw, NAMESPACES.volunteer, { protocol: PROTOCOL_VERSION, capabilities: SIM_CAPABILITIES }), 'rate_limited');
  assert.notEqual((await rawConnection(server.url)).error, null, 'the engine handshake is refused');
  assert.equal((await fetch(`${server.url}/healthz`)).status, 429);
});

test('volunteer handshakes take from the address bucket too', { timeout: 30_000 }, async () => {
  const server = await serverWith({ httpRateLimit: { perSecond: 1, burst: 20 }, joinGraceMs: 30_000 });
  const raw = await rawConnection(server.url);
  const codes: string[] = [];
  for (let i = 0; i < 30; i++) codes.push(await handshake(raw, NAMESPACES.volunteer, { protocol: 0 }));
  assert.ok(codes.includes('protocol_version'));
  assert.ok(codes.filter((c) => c === 'rate_limited').length >= 10, codes.join(' '));
});
