// The lean volunteer endpoint (server/src/sockets/lean-volunteers.ts) through the real server and the
// real socket.io-client: jobs run over it (binary both ways, members on both endpoints in one job),
// and every edge check Socket.IO's path has holds on it too.
import assert from 'node:assert/strict';
import { after, afterEach, test } from 'node:test';
import { checksumOf, NAMESPACES, PROTOCOL_VERSION, VOLUNTEER_SOCKET_PATH, type RoundBegin } from '@tabfleet/protocol';
import { io } from 'socket.io-client';
import WebSocket from 'ws';
import { SIM_CAPABILITIES, waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

const servers: TestServer[] = [];
afterEach(async () => {
  for (const s of servers) await s.stopJobs();
});
after(async () => {
  for (const s of servers) await s.stop();
});
async function serverWith(opts: Parameters<typeof startTestServer>[0] = {}): Promise<TestServer> {
  const s = await startTestServer(opts);
  servers.push(s);
  return s;
}

const AUTH = { protocol: PROTOCOL_VERSION, capabilities: SIM_CAPABILITIES };

/** A raw WebSocket to the lean path: its open, the text messages it got, and its close. */
async function rawLean(url: string, headers: Record<string, string> = {}, transport = 'websocket'): Promise<{ ws: WebSocket; texts: string[]; closed: Promise<number> }> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}${VOLUNTEER_SOCKET_PATH}?EIO=4&transport=${transport}`, { headers });
  const texts: string[] = [];
  ws.on('message', (m, binary) => {
    if (!binary) texts.push(String(m));
  });
  const closed = new Promise<number>((r) => ws.on('close', (code) => r(code)));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    ws.once('error', reject);
  });
  return { ws, texts, closed };
}

async function joined(raw: Awaited<ReturnType<typeof rawLean>>): Promise<void> {
  raw.ws.send(`40${NAMESPACES.volunteer},${JSON.stringify(AUTH)}`);
  await waitFor('the namespace CONNECT', () => raw.texts.some((t) => t.startsWith(`40${NAMESPACES.volunteer},`)));
}

test('a star round over the lean endpoint: updates up and the mean back, binary both ways', { timeout: 60_000 }, async () => {
  const server = await serverWith();
  const job = await server.createJob({ preset: 'cnn-fashion', minWorkers: 3, maxWorkers: 3, trust: 'trusted' });
  const sims = await Promise.all([0, 1, 2].map(() => server.volunteer()));
  let failed = false;
  sims[1].failRound = (r) => (r.mode === 'ring' && !failed ? ((failed = true), 'unreachable') : null);
  for (const s of sims) await s.request(job.id);
  const star = await waitFor('a star round', () => sims[0].events.map((e) => e.payload as RoundBegin).find((p) => p?.mode === 'star'));
  const before = sims.map((s) => s.params.slice());
  await waitFor('the star round commits', () => sims.every((s) => s.applied.has(star.seq)));
  const got = sims[0].applied.get(star.seq)!;
  assert.ok(got.every((x, i) => Math.abs(x - (before[0][i] + before[1][i] + before[2][i]) / 3) < 1e-5), 'the server returned the mean');
  assert.equal(new Set(sims.map((s) => checksumOf(s.applied.get(star.seq)!))).size, 1);
});

test('one job, members on both endpoints: syncs commit with one checksum; a lean member that leaves is gone from the job', { timeout: 60_000 }, async () => {
  const server = await serverWith();
  const job = await server.createJob({ preset: 'mlp-fashion', minWorkers: 3, maxWorkers: 4, trust: 'trusted' });
  const sims = await Promise.all((['lean', 'socket.io', 'lean'] as const).map((endpoint) => server.volunteer({ endpoint })));
  for (const s of sims) s.holdRounds = false;
  for (const s of sims) await s.request(job.id);
  await waitFor('two syncs on every member', () => sims.every((s) => s.applied.has(2)));
  assert.equal(new Set(sims.map((s) => checksumOf(s.applied.get(2)!))).size, 1);
  const gone = sims[0].volunteerId;
  sims[0].close();
  await waitFor('the lean member leaves the job', async () => {
    const workers = (await server.api(`/api/jobs/${job.id}`)).body.workers as { volunteerId: string; state: string }[];
    return workers.find((w) => w.volunteerId === gone)?.state === 'left';
  });
});

test('handshakes over the lean path: a wrong protocol version and another namespace are refused with their codes', async () => {
  const server = await serverWith();
  const refused = (namespace: string, auth: object) => new Promise<string>((resolve) => {
    const s = io(`${server.url}${namespace}`, { path: VOLUNTEER_SOCKET_PATH, transports: ['websocket'], reconnection: false, auth, forceNew: true });
    s.on('connect', () => resolve('connected'));
    s.on('connect_error', (e) => {
      s.close();
      resolve((e as Error & { data?: { code?: string } }).data?.code ?? e.message);
    });
  });
  assert.equal(await refused(NAMESPACES.volunteer, { ...AUTH, protocol: -1 }), 'protocol_version');
  assert.equal(await refused(NAMESPACES.dashboard, {}), 'unknown_event');
  assert.equal(await refused(NAMESPACES.volunteer, AUTH), 'connected');
});

test('the edge holds on the lean path: Host, the per-address cap, the join grace, polling refused', { timeout: 60_000 }, async () => {
  const server = await serverWith({ addressLimits: { connections: 2 }, joinGraceMs: 300 });
  await assert.rejects(rawLean(server.url, { host: 'evil.example' }), /HTTP 400/);
  await assert.rejects(rawLean(server.url, {}, 'polling'), /HTTP 400/);
  // The cap is the volunteers' cap plus CONNECTION_SLACK (8) engine connections: 10 open, the 11th refused.
  const open = [];
  for (let i = 0; i < 10; i++) open.push(await rawLean(server.url));
  await assert.rejects(rawLean(server.url), /HTTP 429/);
  // None of them joined: each is closed after the grace, and the address may connect again.
  await Promise.all(open.map((o) => o.closed));
  const again = await rawLean(server.url);
  await joined(again);
  await new Promise((r) => setTimeout(r, 600));
  assert.equal(again.ws.readyState, WebSocket.OPEN, 'a connection that joined is kept past the grace');
  again.ws.close();
});

test('bad input on the lean path closes that connection only: an overlong text, two attachments, a binary nobody announced', { timeout: 60_000 }, async () => {
  const server = await serverWith();
  const bystander = await server.volunteer();
  const cases: [string, (ws: WebSocket) => void][] = [
    ['an overlong text', (ws) => ws.send(`42${NAMESPACES.volunteer},["status",${JSON.stringify({ pad: 'x'.repeat(200_000) })}]`)],
    ['two attachments', (ws) => ws.send(`452-${NAMESPACES.volunteer},["star:update",{"a":{"_placeholder":true,"num":0},"b":{"_placeholder":true,"num":1}}]`)],
    ['an unannounced binary', (ws) => ws.send(Buffer.from([1, 2, 3]))],
    ['an event before joining', (ws) => ws.send(`42${NAMESPACES.volunteer},["status",{}]`)],
  ];
  for (const [what, send] of cases) {
    const raw = await rawLean(server.url);
    if (what !== 'an event before joining') await joined(raw);
    send(raw.ws);
    await Promise.race([raw.closed, new Promise((_, reject) => setTimeout(() => reject(new Error(`${what}: the connection stayed open`)), 10_000))]);
  }
  assert.equal((await bystander.emit('status', { state: 'idle', step: 0, samplesPerSec: 0, bytesSent: 0, bytesReceived: 0 })).ok, true, 'the bystander still gets answers');
});

test('a bad event on the lean path gets the guard\'s coded answer, and a flood ends in a disconnect', { timeout: 60_000 }, async () => {
  const server = await serverWith();
  const sim = await server.volunteer();
  const unknown = await sim.emit('no:such' as never, {} as never);
  assert.equal(!unknown.ok && unknown.error.code, 'unknown_event');
  const bad = await sim.emit('round:ready', { jobId: 'nope' } as never);
  assert.equal(!bad.ok && bad.error.code, 'bad_request');
  const raw = await rawLean(server.url);
  await joined(raw);
  // Within the text bound, but over the event's when written out again (each 1e20 is 21 characters):
  // past the guard's packet-size shortcut (guard.ts), measured, and refused.
  raw.ws.send(`42${NAMESPACES.volunteer},["status",[${'1e20,'.repeat(4000)}1]]`);
  await waitFor('too_large for a packet that grows when written', () => raw.texts.some((t) => t.includes('"protocol:error"') && t.includes('too_large')));
  for (let i = 0; i < 600; i++) raw.ws.send(`42${NAMESPACES.volunteer},["status",{"state":"idle"}]`);
  await Promise.race([raw.closed, new Promise((_, reject) => setTimeout(() => reject(new Error('the flood was not disconnected')), 20_000))]);
  assert.ok(raw.texts.some((t) => t.includes('event flood')), 'told why');
});
