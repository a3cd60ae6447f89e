// Every event, fed bad input: each row asserts the error code the sender gets back and that the store
// (jobs, rounds, metrics, checkpoints, settings) is byte-for-byte unchanged.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { LIMITS, MAX_RTT_PEERS, NAMESPACES, PROTOCOL_VERSION, VOLUNTEER_EVENTS, type Ack, type RoundBegin } from '@tabfleet/protocol';
import { io } from 'socket.io-client';
import { SIM_CAPABILITIES, SimVolunteer, waitFor } from '../src/testing/sim-volunteer';
import { skippableClock, startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
// The server's time, held still through the event flood (the only test that stops it).
const time = skippableClock();
let jobId: string;
let round: RoundBegin;
let ring: SimVolunteer[];
let outsider: SimVolunteer;

before(async () => {
  server = await startTestServer({ clock: time.clock });
  jobId = (await server.createJob({ minWorkers: 3, maxWorkers: 3 })).id;
  const sims = await Promise.all([0, 1, 2].map(() => server.volunteer()));
  for (const s of sims) s.holdRounds = true; // a round stays open while the table runs
  for (const s of sims) await s.request(jobId);
  round = await waitFor('round:begin', () => sims[0].events.find((e) => e.name === 'round:begin')?.payload as RoundBegin | undefined);
  const byId = new Map(sims.map((s) => [s.volunteerId, s]));
  ring = round.members.map((id) => byId.get(id)!);
  outsider = await server.volunteer();
});
after(() => server.stop());

async function digest(): Promise<string> {
  await server.hub.flushed();
  return server.store.digest();
}

interface Row {
  name: string;
  event: string;
  /** Built when the row runs (the round's ids are known by then). */
  payload: () => unknown;
  code: string;
  from?: () => SimVolunteer;
}

const r = () => ({ jobId, roundId: round.roundId });
const metrics = { loss: 1, samples: 1, wallMs: 1, bytesSent: 1, bytesReceived: 1 };
const validation = { part: 0, received: ['0'.repeat(32)], aggregate: '0'.repeat(32), refused: [] };
const ROWS: Row[] = [
  { name: 'unknown event', event: 'jobs:delete', payload: () => ({ jobId }), code: 'unknown_event' },
  { name: 'payload not an object', event: 'round:ready', payload: () => 42, code: 'bad_request' },
  { name: 'JSON over the size limit', event: 'leave', payload: () => ({ reason: 'x'.repeat(LIMITS.maxEventBytes + 10) }), code: 'too_large' },
  { name: 'work:request bad job id', event: 'work:request', payload: () => ({ jobId: '../../etc' }), code: 'bad_request', from: () => outsider },
  { name: 'work:request unknown job', event: 'work:request', payload: () => ({ jobId: 'job-nope' }), code: 'unknown_job', from: () => ring[0] },
  { name: 'work:request extra field', event: 'work:request', payload: () => ({ jobId, admin: true }), code: 'bad_request' },
  { name: 'work:request full job', event: 'work:request', payload: () => ({ jobId }), code: 'capacity', from: () => outsider },
  { name: 'model:loaded missing fields', event: 'model:loaded', payload: () => ({ jobId }), code: 'bad_request' },
  { name: 'model:loaded negative seq', event: 'model:loaded', payload: () => ({ jobId, seq: -1, checksum: 'abcdef01' }), code: 'bad_request' },
  { name: 'model:loaded bad checksum', event: 'model:loaded', payload: () => ({ jobId, seq: 0, checksum: 'ZZ' }), code: 'bad_request' },
  { name: 'model:loaded not asked', event: 'model:loaded', payload: () => ({ jobId, seq: 0, checksum: 'abcdef01' }), code: 'stale_round' },
  { name: 'model:loaded unknown job', event: 'model:loaded', payload: () => ({ jobId: 'job-nope', seq: 0, checksum: 'abcdef01' }), code: 'not_member' },
  { name: 'round:ready wrong type', event: 'round:ready', payload: () => ({ jobId, seq: '1', step: 1 }), code: 'bad_request' },
  { name: 'round:ready future sync', event: 'round:ready', payload: () => ({ jobId, seq: 99, step: 1 }), code: 'stale_round' },
  { name: 'round:ready from outsider', event: 'round:ready', payload: () => ({ jobId, seq: 1, step: 1 }), code: 'unknown_job', from: () => outsider },
  { name: 'round:result stale round', event: 'round:result', payload: () => ({ jobId, roundId: round.roundId + 5, checksum: 'abcdef01', step: 1, metrics }), code: 'stale_round' },
  { name: 'round:result no metrics', event: 'round:result', payload: () => ({ ...r(), checksum: 'abcdef01', step: 1 }), code: 'bad_request' },
  { name: 'round:result negative samples', event: 'round:result', payload: () => ({ ...r(), checksum: 'abcdef01', step: 1, metrics: { ...metrics, samples: -3 } }), code: 'bad_request' },
  { name: 'round:failed unknown code', event: 'round:failed', payload: () => ({ ...r(), code: 'bored' }), code: 'bad_request' },
  { name: 'round:failed stale round', event: 'round:failed', payload: () => ({ jobId, roundId: round.roundId + 5, code: 'peer_lost' }), code: 'stale_round' },
  { name: 'signal to a non-member', event: 'signal', payload: () => ({ ...r(), to: 'v-000000000000', data: { sdp: 'x' } }), code: 'not_neighbour' },
  { name: 'signal without data', event: 'signal', payload: () => ({ ...r(), to: ring[1].volunteerId }), code: 'bad_request' },
  { name: 'signal oversized', event: 'signal', payload: () => ({ ...r(), to: ring[1].volunteerId, data: 'x'.repeat(LIMITS.maxSignalBytes + 1) }), code: 'bad_request' },
  { name: 'signal from outsider', event: 'signal', payload: () => ({ ...r(), to: ring[1].volunteerId, data: {} }), code: 'unknown_job', from: () => outsider },
  { name: 'signal as a probe to a member nobody was told to measure', event: 'signal', payload: () => ({ jobId, roundId: 0, to: ring[1].volunteerId, data: { sdp: 'x' } }), code: 'not_neighbour' },
  { name: 'peers:rtt with no probe open', event: 'peers:rtt', payload: () => ({ jobId, rttMs: { [ring[1].volunteerId]: 5 } }), code: 'conflict' },
  { name: 'peers:rtt negative round trip', event: 'peers:rtt', payload: () => ({ jobId, rttMs: { [ring[1].volunteerId]: -1 } }), code: 'bad_request' },
  {
    name: 'peers:rtt about too many peers',
    event: 'peers:rtt',
    payload: () => ({ jobId, rttMs: Object.fromEntries(Array.from({ length: MAX_RTT_PEERS + 1 }, (_, i) => [`v-${String(i).padStart(12, '0')}`, 5])) }),
    code: 'bad_request',
  },
  {
    name: 'links:paths of an unknown candidate type', event: 'links:paths', code: 'bad_request',
    payload: () => ({ jobId, links: [{ peer: ring[1].volunteerId, local: 'turn', remote: 'host', rttMs: 1 }] }),
  },
  { name: 'links:paths to itself', event: 'links:paths', payload: () => ({ jobId, links: [{ peer: ring[0].volunteerId, local: 'host', remote: 'host', rttMs: 1 }] }), code: 'bad_request' },
  { name: 'links:paths from outsider', event: 'links:paths', payload: () => ({ jobId, links: [] }), code: 'unknown_job', from: () => outsider },
  { name: 'round:validation while nothing is validated', event: 'round:validation', payload: () => ({ ...r(), parts: [validation] }), code: 'conflict' },
  { name: 'round:validation with a malformed digest', event: 'round:validation', payload: () => ({ ...r(), parts: [{ ...validation, aggregate: 'nope' }] }), code: 'bad_request' },
  {
    name: 'round:validation of more parts than a group has',
    event: 'round:validation',
    payload: () => ({ ...r(), parts: Array.from({ length: LIMITS.maxGroupSize + 1 }, () => validation) }),
    code: 'bad_request',
  },
  { name: 'evidence:upload not asked', event: 'evidence:upload', payload: () => ({ ...r(), part: 0, data: new Uint8Array(8) }), code: 'conflict' },
  { name: 'evidence:upload not binary', event: 'evidence:upload', payload: () => ({ ...r(), part: 0, data: [1, 2] }), code: 'bad_request' },
  { name: 'evidence:upload part out of range', event: 'evidence:upload', payload: () => ({ ...r(), part: LIMITS.maxGroupSize, data: new Uint8Array(8) }), code: 'bad_request' },
  { name: 'replica:upload of a unit that is not open', event: 'replica:upload', payload: () => ({ jobId, unitId: 'unit-1-1', data: new Uint8Array(8) }), code: 'conflict' },
  { name: 'replica:upload not binary', event: 'replica:upload', payload: () => ({ jobId, unitId: 'unit-1-1', data: 'AAAA' }), code: 'bad_request' },
  { name: 'star:update in a ring round', event: 'star:update', payload: () => ({ ...r(), data: new Uint8Array(8) }), code: 'conflict' },
  { name: 'star:update not binary', event: 'star:update', payload: () => ({ ...r(), data: [1, 2, 3] }), code: 'bad_request' },
  { name: 'checkpoint:upload not asked', event: 'checkpoint:upload', payload: () => ({ jobId, seq: 0, step: 0, data: new Uint8Array(16) }), code: 'conflict' },
  { name: 'checkpoint:upload not binary', event: 'checkpoint:upload', payload: () => ({ jobId, seq: 0, step: 0, data: 'AAAA' }), code: 'bad_request' },
  { name: 'metrics accuracy over 1', event: 'metrics', payload: () => ({ jobId, seq: 0, checksum: '00000000', accuracy: 2, loss: 1 }), code: 'bad_request' },
  { name: 'metrics for a sync it was not asked to evaluate', event: 'metrics', payload: () => ({ jobId, seq: 5, checksum: '00000000', accuracy: 0.5, loss: 1 }), code: 'not_member' },
  { name: 'status unknown state', event: 'status', payload: () => ({ state: 'flying', step: 0, samplesPerSec: 0, bytesSent: 0, bytesReceived: 0 }), code: 'bad_request' },
  { name: 'profile name with markup', event: 'profile', payload: () => ({ displayName: '<img src=x>' }), code: 'bad_request' },
  { name: 'profile name too long', event: 'profile', payload: () => ({ displayName: 'x'.repeat(41) }), code: 'bad_request' },
  { name: 'profile without a client id', event: 'profile', payload: () => ({ displayName: 'Ada' }), code: 'bad_request' },
  { name: 'leave reason too long', event: 'leave', payload: () => ({ reason: 'x'.repeat(300) }), code: 'bad_request' },
];

test('the table covers every volunteer event', () => {
  const covered = new Set(ROWS.map((row) => row.event));
  for (const event of Object.keys(VOLUNTEER_EVENTS)) assert.ok(covered.has(event), `no malformed-input row for ${event}`);
});

for (const row of ROWS) {
  test(`refused: ${row.name} → ${row.code}`, async () => {
    const before = await digest();
    const sender = (row.from ?? (() => ring[0]))();
    const ack = (await sender.socket.timeout(5_000).emitWithAck(row.event, row.payload())) as Ack;
    assert.equal(ack.ok, false, `expected a refusal, got ${JSON.stringify(ack)}`);
    assert.equal(!ack.ok && ack.error.code, row.code, !ack.ok ? ack.error.message : '');
    assert.ok(!ack.ok && ack.error.message.length > 0);
    assert.equal(await digest(), before, 'the store changed');
    assert.ok(ring.every((s) => s.socket.connected), 'a bad event does not cost the members their connection');
  });
}

test('an event without an ack gets a protocol:error event', async () => {
  const before = await digest();
  const error = new Promise<{ event: string; code: string }>((resolve) => ring[0].socket.once('protocol:error', resolve));
  ring[0].socket.emit('round:ready', { jobId, seq: 'x' });
  assert.deepEqual(await error.then((e) => [e.event, e.code]), ['round:ready', 'bad_request']);
  assert.equal(await digest(), before);
});

test('the round survived the whole table', async () => {
  const before = await digest();
  for (const s of ring) s.releaseRound();
  await waitFor('the held round commits', () => ring.every((s) => s.committed.includes(round.seq)));
  assert.notEqual(await digest(), before, 'a good round does change the store');
  // The next round (held too) begins once the members have trained: the rows below see a quiet store.
  await waitFor('the next round begins', () => ring[0].events.some((e) => e.name === 'round:begin' && (e.payload as RoundBegin).seq === round.seq + 1));
});

function connectRaw(namespace: string, auth: unknown) {
  return io(`${server.url}${namespace}`, { auth: auth as object, transports: ['websocket'], reconnection: false });
}

async function handshakeError(namespace: string, auth: unknown): Promise<string> {
  const socket = connectRaw(namespace, auth);
  try {
    return await new Promise<string>((resolve, reject) => {
      socket.on('connect', () => reject(new Error('connected')));
      socket.on('connect_error', (e) => resolve((e as Error & { data?: { code: string } }).data?.code ?? e.message));
    });
  } finally {
    socket.close();
  }
}

test('handshakes: wrong protocol version, bad capabilities, bad token', async () => {
  const before = await digest();
  assert.equal(await handshakeError(NAMESPACES.volunteer, { protocol: PROTOCOL_VERSION + 1, capabilities: SIM_CAPABILITIES }), 'protocol_version');
  assert.equal(await handshakeError(NAMESPACES.volunteer, { protocol: PROTOCOL_VERSION }), 'bad_request');
  assert.equal(await handshakeError(NAMESPACES.volunteer, { protocol: PROTOCOL_VERSION, capabilities: { ...SIM_CAPABILITIES, backend: 'quantum' } }), 'bad_request');
  assert.equal(await handshakeError(NAMESPACES.dashboard, { protocol: PROTOCOL_VERSION, token: 'wrong' }), 'unauthorized');
  assert.equal(await handshakeError(NAMESPACES.dashboard, { protocol: 0, token: 'test-token' }), 'protocol_version');
  assert.equal(await digest(), before);
});

test('dashboard events: unknown job and bad payloads', async () => {
  const before = await digest();
  const socket = connectRaw(NAMESPACES.dashboard, { protocol: PROTOCOL_VERSION, token: 'test-token' });
  await new Promise((resolve) => socket.on('connect', resolve as () => void));
  const unknown = (await socket.emitWithAck('subscribe', { jobId: 'job-nope' })) as Ack;
  assert.equal(!unknown.ok && unknown.error.code, 'unknown_job');
  const bad = (await socket.emitWithAck('subscribe', { jobId: 3 })) as Ack;
  assert.equal(!bad.ok && bad.error.code, 'bad_request');
  const ok = (await socket.emitWithAck('subscribe', { jobId })) as Ack<{ job: { id: string } }>;
  assert.equal(ok.ok && ok.job.id, jobId);
  socket.close();
  assert.equal(await digest(), before);
});

test('an event flood is rate limited, then disconnected', { timeout: 30_000 }, async () => {
  const flooder = await server.volunteer();
  const before = await digest();
  const codes = new Map<string, number>();
  const disconnected = new Promise<string>((resolve) => flooder.socket.on('disconnect', resolve));
  // The flood arrives at one instant of the server's time, however slowly a busy machine delivers it:
  // its bucket refills nothing meanwhile (on the wall clock, beside a CPU hog, 6 more got through: 120 ms of refill).
  const release = time.hold();
  try {
    const acks = Array.from({ length: LIMITS.eventBurst + LIMITS.floodDisconnectAfter + 50 }, () =>
      flooder.socket.timeout(3_000).emitWithAck('status', { state: 'idle', step: 0, samplesPerSec: 0, bytesSent: 0, bytesReceived: 0 })
        .then((a: Ack) => codes.set(a.ok ? 'ok' : a.error.code, (codes.get(a.ok ? 'ok' : a.error.code) ?? 0) + 1))
        .catch(() => codes.set('no answer', (codes.get('no answer') ?? 0) + 1)),
    );
    assert.equal(await disconnected, 'io server disconnect');
    await Promise.all(acks);
  } finally {
    release();
  }
  assert.ok((codes.get('ok') ?? 0) <= LIMITS.eventBurst, `at most a burst accepted: ${JSON.stringify([...codes])}`);
  assert.ok((codes.get('rate_limited') ?? 0) >= LIMITS.floodDisconnectAfter - 1, JSON.stringify([...codes]));
  assert.equal(await digest(), before);
  assert.ok(ring.every((s) => s.socket.connected));
});

test('a message over the Socket.IO size limit closes that connection only', { timeout: 30_000 }, async () => {
  const big = await server.volunteer();
  const before = await digest();
  const disconnected = new Promise<string>((resolve) => big.socket.on('disconnect', resolve));
  big.socket.emit('star:update', { jobId, roundId: 1, data: new Uint8Array(LIMITS.maxSocketMessageBytes + 1024) }, () => {});
  assert.match(await disconnected, /transport (close|error)/);
  assert.equal(await digest(), before);
  assert.ok(ring.every((s) => s.socket.connected));
});
