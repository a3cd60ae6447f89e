// One address cannot take every slot: it holds at most so many volunteer connections, and at most a
// share of any job's slots. (Reproduced before: 300 sockets from one address were all accepted.)
import assert from 'node:assert/strict';
import { afterEach, beforeEach, test } from 'node:test';
import { NAMESPACES, PROTOCOL_VERSION } from '@tabfleet/protocol';
import { io, type Socket } from 'socket.io-client';
import { SIM_CAPABILITIES, waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

// A server per test: the 300 handshakes of the first drain the address's request bucket, which the
// second would otherwise find empty (a bare websocket error, as CI saw once).
let server: TestServer;
beforeEach(async () => {
  server = await startTestServer({ addressLimits: { connections: 5, jobShare: 0.5 } });
});
afterEach(() => server.stop());

function connect(): Promise<{ socket: Socket; error: string | null }> {
  const socket = io(`${server.url}${NAMESPACES.volunteer}`, { auth: { protocol: PROTOCOL_VERSION, capabilities: SIM_CAPABILITIES }, transports: ['websocket'], reconnection: false });
  return new Promise((resolve) => {
    socket.once('welcome', () => resolve({ socket, error: null }));
    socket.once('connect_error', (e) => resolve({ socket, error: (e as Error & { data?: { code: string } }).data?.code ?? e.message }));
  });
}

test('300 connections at once from one address: 5 are accepted, the rest refused', async () => {
  const all = await Promise.all(Array.from({ length: 300 }, connect));
  try {
    assert.equal(all.filter((c) => c.error === null).length, 5);
    // By the volunteer namespace (`rate_limited`), or before it: the engine handshake refused beyond
    // 5 + CONNECTION_SLACK connections or the address's request bucket (a bare websocket error).
    const errors = all.filter((c) => c.error !== null).map((c) => c.error);
    assert.ok(errors.every((e) => e === 'rate_limited' || e === 'websocket error'), JSON.stringify([...new Set(errors)]));
    assert.ok(errors.includes('rate_limited'), 'the namespace says why');
  } finally {
    for (const c of all) c.socket.close();
  }
  // Closed connections free their places (once the server has seen them close: retried until then).
  await waitFor('a new connection accepted', async () => {
    const again = await connect();
    again.socket.close();
    return again.error === null;
  }, 10_000, 100);
});

test('one address holds at most half of a job’s slots', async () => {
  const job = await server.createJob({ minWorkers: 2, maxWorkers: 4 });
  const sims = [await server.volunteer(), await server.volunteer(), await server.volunteer()];
  assert.equal((await sims[0].request(job.id)).ok, true);
  assert.equal((await sims[1].request(job.id)).ok, true);
  const third = await sims[2].request(job.id);
  assert.equal(!third.ok && third.error.code, 'rate_limited');
  assert.match(!third.ok ? third.error.message : '', /2 of this job's slots are taken from your address \(at most 2\)/);
  for (const s of sims) s.close();
});
