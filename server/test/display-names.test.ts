// Display names cost nothing to set, so one address may set only so many (issue 34: 280 rows/s from
// one address through the handshake's displayName and `profile`, never pruned), and the store keeps
// only so many names of ids that have no committed sync (server/test/contributor-store.test.ts).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Ack } from '@tabfleet/protocol';
import { DEFAULT_NAME_WRITES } from '../src/sockets/volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

const id = (i: number) => `name-test-${String(i).padStart(8, '0')}`;

/** 'welcome', or the refused handshake's code. */
async function connectNamed(i: number, displayName: string): Promise<string> {
  try {
    const v = await server.volunteer({ clientId: id(i), displayName });
    v.close();
    return 'welcome';
  } catch (e) {
    return (e as Error & { data?: { code?: string } }).data?.code ?? (e as Error).message;
  }
}

test('one address sets at most a burst of display names, then one a minute; a name sent again unchanged is free', { timeout: 60_000 }, async () => {
  const burst = DEFAULT_NAME_WRITES.burst;
  const results: string[] = [];
  for (let i = 0; i < burst + 20; i++) results.push(await connectNamed(i, `Volunteer ${i}`));
  // The bucket refills one a minute: a slow machine may see one more go through.
  const welcomed = results.filter((r) => r === 'welcome').length;
  assert.ok(welcomed >= burst && welcomed <= burst + 1, `${welcomed} names set: ${results.join(' ')}`);
  assert.ok(results.slice(burst + 1).every((r) => r === 'rate_limited'), results.join(' '));
  const stored = await server.store.displayNames(Array.from({ length: burst + 20 }, (_, i) => id(i)));
  assert.equal(stored.size, welcomed, 'refused names are not stored');

  // Reconnecting with the name it already has costs nothing (the volunteer page sends it every time).
  assert.equal(await connectNamed(0, 'Volunteer 0'), 'welcome');
  // A change through `profile` takes from the same bucket; clearing a name does not.
  const v = await server.volunteer({ clientId: id(1) });
  const refused = (await v.emit('profile', { displayName: 'Renamed' })) as Ack;
  assert.equal(!refused.ok && refused.error.code, 'rate_limited');
  assert.deepEqual(await v.emit('profile', { displayName: 'Volunteer 1' }), { ok: true, displayName: 'Volunteer 1' }, 'unchanged: free');
  assert.deepEqual(await v.emit('profile', { displayName: null }), { ok: true, displayName: null });
  v.close();
});
