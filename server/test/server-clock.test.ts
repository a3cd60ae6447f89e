// What the server tells sockets about time comes from its one clock (the one tests inject), not the
// wall clock beside it: the `welcome` a volunteer sets its clock offset by, and the dashboard's event
// bucket. The server here runs six hours ahead of the wall clock.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { LIMITS, NAMESPACES, PROTOCOL_VERSION, type Ack, type RoundBegin } from '@tabfleet/protocol';
import { io, type Socket } from 'socket.io-client';
import { waitFor } from '../src/testing/sim-volunteer';
import { skippableClock, startTestServer, type TestServer } from '../src/testing/test-server';

const AHEAD_MS = 6 * 3_600_000;
const time = skippableClock();
let server: TestServer;

before(async () => {
  server = await startTestServer({ clock: time.clock });
  time.skip(AHEAD_MS);
});
after(() => server.stop());

test('welcome names the server clock\'s time, the one its rounds\' began and deadline are on', { timeout: 60_000 }, async () => {
  const jobId = (await server.createJob({ minWorkers: 2, maxWorkers: 2 })).id;
  const sims = await Promise.all([0, 1].map(() => server.volunteer()));
  for (const s of sims) s.holdRounds = true;
  const welcome = sims[0].events.find((e) => e.name === 'welcome')!.payload as { serverTime: number };
  // The runtime's offset is serverTime − its own now; six hours off, every deadline it computes is too.
  assert.ok(Math.abs(welcome.serverTime - time.clock.now()) < 60_000, `serverTime ${welcome.serverTime}, server clock ${time.clock.now()}`);
  for (const s of sims) await s.request(jobId);
  const round = await waitFor('round:begin', () => sims[0].events.find((e) => e.name === 'round:begin')?.payload as RoundBegin | undefined);
  assert.ok(round.began >= welcome.serverTime && round.began - welcome.serverTime < 60_000, `began ${round.began}, welcome ${welcome.serverTime}`);
});

function dashboard(): Promise<Socket> {
  const socket = io(`${server.url}${NAMESPACES.dashboard}`, { auth: { protocol: PROTOCOL_VERSION, token: 'test-token' }, transports: ['websocket'], reconnection: false });
  return new Promise((resolve, reject) => {
    socket.once('connect', () => resolve(socket));
    socket.once('connect_error', reject);
  });
}

async function unsubscribe(socket: Socket, n: number): Promise<Map<string, number>> {
  const codes = new Map<string, number>();
  await Promise.all(Array.from({ length: n }, () =>
    socket.timeout(5_000).emitWithAck('unsubscribe', {}).then((a: Ack) => codes.set(a.ok ? 'ok' : a.error.code, (codes.get(a.ok ? 'ok' : a.error.code) ?? 0) + 1))));
  return codes;
}

test('the dashboard\'s event bucket refills on the server clock: held, a spent bucket stays spent however long the wall clock runs', { timeout: 60_000 }, async () => {
  const socket = await dashboard();
  const release = time.hold();
  try {
    assert.deepEqual([...await unsubscribe(socket, LIMITS.eventBurst)], [['ok', LIMITS.eventBurst]]);
    // Wall time enough to refill 20 tokens, were the bucket on Date.now.
    await new Promise((r) => setTimeout(r, (20 * 1000) / LIMITS.eventsPerSecond));
    assert.deepEqual([...await unsubscribe(socket, 5)], [['rate_limited', 5]]);
  } finally {
    release();
  }
  // Released, the clock jumps ahead by the time it was held, and the bucket refills by that.
  await new Promise((r) => setTimeout(r, 200));
  assert.deepEqual([...await unsubscribe(socket, 5)], [['ok', 5]]);
  socket.close();
});
