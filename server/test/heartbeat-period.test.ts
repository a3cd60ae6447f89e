// Through the real server and Socket.IO: a node tells each volunteer how often to send its status
// heartbeat, longer as the node's volunteers pass its heartbeat budget (here 1 a second, so 3 tabs
// already double it), and, a while after their number moved it, tells all of them the new period at
// once: one announcement for a burst of joins, another when they leave. On fake time.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { heartbeatPeriodMs } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { HEARTBEAT_ANNOUNCE_AFTER_MS } from '../src/sockets/heartbeat-period';
import { waitFor, type SimVolunteer } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

const clock = new FakeClock(Date.now());
let server: TestServer | null = null;
after(() => server?.stop());

const welcomed = (s: SimVolunteer) => (s.events.find((e) => e.name === 'welcome')!.payload as { heartbeatMs: number }).heartbeatMs;
const told = (s: SimVolunteer) => s.events.filter((e) => e.name === 'heartbeat').map((e) => (e.payload as { ms: number }).ms);

test('volunteers are told a longer heartbeat as the node fills past its budget, all at once, and a shorter one as they leave', async () => {
  server = await startTestServer({ clock, heartbeatsPerSec: 1 });
  const vols: SimVolunteer[] = [];
  for (let i = 0; i < 5; i++) {
    vols.push(await server.volunteer());
    await vols[i].connected();
  }
  // Welcomed with the period for the node as it was: 1 and 2 tabs fit every 2 s, 3 and 4 every 4 s, 5 every 8 s.
  assert.deepEqual(vols.map(welcomed), [1, 2, 3, 4, 5].map((n) => heartbeatPeriodMs(n, 1)));
  assert.deepEqual(vols.map(welcomed), [2_000, 2_000, 4_000, 4_000, 8_000]);
  assert.deepEqual(vols.flatMap(told), [], 'nothing announced before the delay');
  await clock.advance(HEARTBEAT_ANNOUNCE_AFTER_MS);
  await waitFor('every volunteer is told the period once', () => vols.every((v) => told(v).length === 1));
  assert.deepEqual(vols.map(told), vols.map(() => [8_000]));

  // Four leave: the one left is told 2 s, once.
  for (const v of vols.slice(1)) v.close();
  await waitFor('the node counts one volunteer', async () => (await server!.api('/metrics')).text.includes('tabfleet_volunteers_connected 1'));
  await clock.advance(HEARTBEAT_ANNOUNCE_AFTER_MS);
  await waitFor('the last volunteer is told the shorter period', () => told(vols[0]).length === 2);
  assert.deepEqual(told(vols[0]), [8_000, 2_000]);
  await clock.advance(10 * HEARTBEAT_ANNOUNCE_AFTER_MS);
  assert.deepEqual(told(vols[0]), [8_000, 2_000], 'and nothing more while the node does not change');
});
