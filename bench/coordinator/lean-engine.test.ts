// The lean engine (lean-engine.ts) against the real socket.io-client over a real WebSocket: the
// handshake with auth, events with and without acks, rooms, pings answered by the client and a silent
// connection closed, and a malformed packet closing only its own connection.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { after, test } from 'node:test';
import { io as connect, type Socket } from 'socket.io-client';
import { WebSocket } from 'ws';
import { LeanEngine, type LeanSocket } from './lean-engine';

const servers: { http: Server; engine: LeanEngine }[] = [];
const clients: Socket[] = [];
after(() => {
  for (const c of clients) c.close();
  for (const s of servers) {
    s.engine.close();
    s.http.close();
  }
});

async function start(pingIntervalMs = 10_000) {
  const http = createServer();
  const connected: LeanSocket[] = [];
  const engine = new LeanEngine(http, { pingIntervalMs, maxPayload: 1 << 20 }, (s) => connected.push(s));
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  servers.push({ http, engine });
  const { port } = http.address() as { port: number };
  return { engine, connected, url: `http://127.0.0.1:${port}` };
}

async function client(url: string, auth: object): Promise<Socket> {
  const socket = connect(url, { transports: ['websocket'], forceNew: true, reconnection: false, auth });
  clients.push(socket);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('connect_error', reject);
  });
  return socket;
}

test('socket.io-client connects with its auth, sends events with and without acks, and hears its rooms only', async () => {
  const { engine, connected, url } = await start();
  const a = await client(url, { jobId: 'job-a' });
  const b = await client(url, { jobId: 'job-b' });
  assert.deepEqual(connected.map((s) => s.auth), [{ jobId: 'job-a' }, { jobId: 'job-b' }]);
  assert.equal(a.id, connected[0].id, 'the client knows the id the server gave it');
  const heard: unknown[] = [];
  for (const s of connected) {
    s.join(String((s.auth as { jobId: string }).jobId));
    s.on('round:ready', (body) => heard.push(body));
    s.on('checkpoint:ask', (body, ack) => (ack as (r: unknown) => void)({ asked: body, ok: true }));
  }
  a.emit('round:ready', { seq: 1, step: 0 });
  const reply = await a.timeout(5000).emitWithAck('checkpoint:ask', { seq: 3 });
  assert.deepEqual(reply, { asked: { seq: 3 }, ok: true });
  assert.deepEqual(heard, [{ seq: 1, step: 0 }], 'events arrive in order, before the ack that followed them');
  const inA: unknown[] = [], inB: unknown[] = [];
  a.on('round:begin', (body) => inA.push(body));
  b.on('round:begin', (body) => inB.push(body));
  engine.to('job-a').emit('round:begin', { seq: 1, members: [a.id] });
  connected[1].emit('round:begin', { seq: 7 });
  await new Promise<void>((resolve) => a.once('round:begin', () => b.once('round:begin', () => resolve())));
  assert.deepEqual(inA, [{ seq: 1, members: [a.id] }]);
  assert.deepEqual(inB, [{ seq: 7 }], 'the room\'s broadcast reaches its members only');
  assert.equal(engine.connections, 2);
});

test('pings: socket.io-client answers and stays; a connection that does not answer is closed', async () => {
  // 2 s, not 50 ms: the client, in this process, must answer within an interval. Beside a busy process
  // at 50 ms it was closed, and the wait for its pings below never ended (a 30-minute CI hang).
  const { engine, url } = await start(2_000);
  const answering = await client(url, { jobId: 'x' });
  // A raw WebSocket that reads the open packet and never answers a ping.
  const silent = new WebSocket(`${url.replace('http', 'ws')}/socket.io/?EIO=4&transport=websocket`);
  const received: string[] = [];
  silent.on('message', (m) => void received.push(m.toString()));
  await once(silent, 'close');
  assert.match(received[0], /^0\{"sid":"[\w-]+","upgrades":\[\],"pingInterval":2000,"pingTimeout":2000,/);
  assert.deepEqual(received.slice(1), ['2'], 'closed at the ping after the one it left unanswered');
  // The answering client hears three more pings and is still connected.
  await new Promise<void>((resolve, reject) => {
    let answered = 0;
    answering.io.engine.on('ping', () => void (++answered === 3 && resolve()));
    answering.on('disconnect', (reason) => reject(new Error(`the answering client was closed after ${answered} pings: ${reason}`)));
    setTimeout(() => reject(new Error(`${answered} of 3 pings in 60 s`)), 60_000).unref();
  });
  assert.equal(answering.connected, true);
  assert.equal(engine.connections, 1);
});

test('a malformed packet closes its own connection and no other', async () => {
  const { engine, connected, url } = await start();
  const kept = await client(url, { jobId: 'x' });
  for (const bad of ['42{"not":"an array"}', '42[1]', '9', '42not json']) {
    const raw = new WebSocket(`${url.replace('http', 'ws')}/socket.io/?EIO=4&transport=websocket`);
    await once(raw, 'message');
    raw.send('40{}');
    await once(raw, 'message');
    raw.send(bad);
    await once(raw, 'close');
  }
  assert.equal(connected.length, 5, 'every raw connection had connected');
  assert.equal(kept.connected, true);
  assert.equal(engine.connections, 1);
});
