// Must show (issue 36): 4 volunteer tabs behind symmetric NATs (endpoint-dependent mapping, random
// ports), each its own headless Chromium in its own home of the network lab. Reflexive candidates are
// useless there (each destination gets a new mapping), so the links go through coturn: it allocates a
// relay under each tab's own REST-API username, every link's selected pair has a relay end, the ring
// syncs commit, and no round falls back to the star.
// It fails on the code the issue was filed against (no ICE servers, before bcba4d8: no link opens and
// every sync is a star round). On main at fd524cf it passes once coturn refuses peers in the homes' LAN
// range (lab-cluster.ts says why); without that, coturn closed each allocation and no link opened.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { waitFor } from '@tabfleet/server/testing';
import { startLabCluster, type LabCluster } from './lab-cluster';
import { relayUsage } from './coturn-usage';
import { isRelayed, selectedPairs } from './link-types';
import { committedRounds, roundsOf, RING_JOB, tabLog } from './lab-jobs';

const TABS = 4;
let cluster: LabCluster;
before(async () => {
  cluster = await startLabCluster({ homes: Array.from({ length: TABS }, () => ({ nat: 'symmetric' as const })) });
});
after(() => cluster?.close());

test('tabs behind symmetric NATs commit ring syncs over links relayed by coturn, no star', { timeout: 12 * 60_000 }, async () => {
  const { server } = cluster;
  const coturn = cluster.coturn!;
  const job = await server.createJob({ ...RING_JOB, minWorkers: TABS, maxWorkers: TABS });
  await cluster.openTabs(tabLog);
  await waitFor('two ring syncs commit', async () => (await committedRounds(server, job.id, 'ring')) >= 2, 8 * 60_000, 1000)
    .catch(async (e: Error) => assert.fail(`${e.message}\nrounds: ${JSON.stringify(await roundsOf(server, job.id))}\nserver log:\n${server.logTail()}`));
  assert.deepEqual((await roundsOf(server, job.id)).filter((r) => r.mode === 'star'), [], 'no star round');
  for (const tab of cluster.tabs) {
    const id = await tab.volunteerId();
    assert.ok(id, `${tab.label} has a volunteer id`);
    assert.match(coturn.log(), new RegExp(`user <\\d+:${id}>: incoming packet ALLOCATE processed, success`), `coturn allocated a relay for ${tab.label} (${id})`);
    const pairs = await selectedPairs(tab.page);
    console.log(`${tab.label}: ${JSON.stringify(pairs)}`);
    assert.ok(pairs.length >= 2, `${tab.label}: its links connected (${JSON.stringify(pairs)})`);
    for (const p of pairs) assert.ok(isRelayed(p), `${tab.label}: a link did not go through the relay: ${JSON.stringify(p)}`);
    assert.deepEqual(tab.errors, []);
  }
  assert.ok(!server.logTail(2000).includes(cluster.turnSecret), 'the server never logs the TURN secret');
  // coturn's side: the syncs' bytes went through its relays. Each link has a relay end, so every byte a
  // tab sends crosses coturn at least once (peer usage counts a byte as it leaves or enters a relay
  // address). Closing the pages releases the allocations, and coturn logs the rest as each closes.
  const tabs = await Promise.all(cluster.tabs.map(async (t) => ({ label: t.label, id: (await t.volunteerId())!, sent: await t.bytesSent() })));
  for (const t of cluster.tabs) await t.page.close();
  let relayed = 0;
  for (const { label, id } of tabs) {
    relayed += (await waitFor(`coturn closes ${label}'s allocations`, () => {
      const u = relayUsage(coturn.log(), id);
      return u.closed === u.allocations ? u : null;
    }, 60_000, 250)).peerBytes;
  }
  const sent = tabs.reduce((a, t) => a + t.sent, 0);
  console.log(`the tabs sent ${sent} bytes over their links; coturn relayed ${relayed}`);
  assert.ok(relayed >= sent, `coturn relayed ${relayed} bytes, the tabs sent ${sent}`);
});
