// Every event is measured on its raw argument, binary attachments at any depth included, before
// anything parses or serializes it (issue 34, finding 1: a Buffer one level down was stringified a
// number per byte first; 8 MiB blocked the event loop 2.8 s, 32 MiB 11.3 s and +665 MB). And the
// packet decoder refuses what no client sends: text longer than any event, a second attachment.
import assert from 'node:assert/strict';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { after, before, test } from 'node:test';
import { LIMITS, type Ack } from '@tabfleet/protocol';
import type { SimVolunteer } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
let outsider: SimVolunteer;
before(async () => {
  server = await startTestServer();
  outsider = await server.volunteer(); // connected, in no job
});
after(() => server.stop());

/**
 * The longest the server's event loop (this process's: the server runs in it) went without turning
 * while `f` ran. Refusing without reading the bytes takes milliseconds; stringifying 30 MiB a number
 * per byte took seconds on every machine it was tried on, so 1 s separates them on a busy one too.
 */
async function longestBlockMs<T>(f: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  try {
    return { value: await f(), ms: h.max / 1e6 };
  } finally {
    h.disable();
  }
}

const NESTED = 30 * 1024 * 1024;
const code = (a: Ack) => (a.ok ? 'ok' : a.error.code);
const send = (event: string, payload: unknown) => outsider.socket.timeout(60_000).emitWithAck(event, payload) as Promise<Ack>;

/**
 * Sends one event from a fresh volunteer (an object, or the Socket.IO packet's text as it goes on the
 * wire, encoded beforehand): 'closed: <reason>' when the server drops the connection, else 'answered <code>'.
 */
async function closesConnection(send: (sender: SimVolunteer) => Promise<Ack>): Promise<string> {
  const sender = await server.volunteer();
  const closed = new Promise<string>((resolve) => sender.socket.on('disconnect', (reason) => resolve(`closed: ${reason}`)));
  const answered = send(sender).then((a) => `answered ${code(a)}`, () => new Promise<string>(() => {}));
  return Promise.race([closed, answered]);
}
const emitFrom = (event: string, payload: unknown) => (sender: SimVolunteer) => sender.socket.timeout(60_000).emitWithAck(event, payload) as Promise<Ack>;

test('30 MiB nested one level down, from a socket in no job: too_large, and the event loop never stalls', { timeout: 120_000 }, async () => {
  const before = await server.store.digest();
  const bytes = Buffer.alloc(NESTED, 255);
  const { value: codes, ms } = await longestBlockMs(async () => [
    code(await send('star:update', { jobId: 'job-x', roundId: 1, data: [bytes] })),
    code(await send('star:update', { jobId: 'job-x', roundId: 1, data: { x: { y: bytes } } })),
    code(await send('status', { state: 'idle', step: 0, samplesPerSec: 0, bytesSent: 0, bytesReceived: 0, x: { y: bytes } })),
  ]);
  assert.deepEqual(codes, ['too_large', 'too_large', 'too_large']);
  assert.ok(ms < 1_000, `the event loop stalled for ${ms.toFixed(0)} ms`);
  assert.equal(await server.store.digest(), before);
  assert.ok(outsider.socket.connected, 'a refused event costs no connection');
});

test('an attachment where its schema has one is measured as one: it reaches the handler', async () => {
  // 1 MiB in star:update's `data` passes size and schema; the job is unknown to this volunteer.
  assert.equal(code(await send('star:update', { jobId: 'job-x', roundId: 1, data: new Uint8Array(1024 * 1024) })), 'unknown_job');
  // The rest of the event is bounded as any event is.
  assert.equal(code(await send('star:update', { jobId: 'job-x', roundId: 1, data: new Uint8Array(8), note: 'x'.repeat(LIMITS.maxEventBytes) })), 'too_large');
});

test('a text message longer than any event closes its connection before it is parsed', { timeout: 120_000 }, async () => {
  // 30 MiB of JSON numbers (before: parsed, then stringified again by the size check), written as
  // the packet's text here so that this process's client does not encode it while it is timed.
  const text = `2/volunteer,["status",{"state":"idle","step":0,"samplesPerSec":0,"bytesSent":0,"bytesReceived":0,"numbers":[${'0,'.repeat(15 * 1024 * 1024)}0]}]`;
  const { value: outcome, ms } = await longestBlockMs(() => closesConnection((sender) => {
    sender.socket.io.engine.send(text);
    // An event without an ack: a refusal would come as protocol:error.
    return new Promise<Ack>((resolve) => sender.socket.once('protocol:error', (error) => resolve({ ok: false, error })));
  }));
  assert.match(outcome, /^closed: (transport (close|error)|parse error)/);
  assert.ok(ms < 1_000, `the event loop stalled for ${ms.toFixed(0)} ms`);
  assert.ok(outsider.socket.connected);
});

test('a packet with two binary attachments closes its connection (one would be held waiting for the other)', { timeout: 60_000 }, async () => {
  const outcome = await closesConnection(emitFrom('star:update', { jobId: 'job-x', roundId: 1, data: new Uint8Array(8), extra: new Uint8Array(8) }));
  assert.match(outcome, /^closed: (transport (close|error)|parse error)/);
  assert.ok(outsider.socket.connected);
});
