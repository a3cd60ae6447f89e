// Must show (issue 36): 4 volunteer tabs behind 4 endpoint-independent NATs, each its own headless
// Chromium in its own home of the network lab, run a trusted ring LocalSGD job whose ring syncs
// commit over server-reflexive links (STUN through coturn): no star round, no relayed link.
// The server names coturn for TURN too, as an operator would, so the ladder must prefer the reflexive
// pair: Chromium allocates a relay while it gathers whichever pair wins, so coturn's ALLOCATE lines say
// nothing here; the links' selected pairs do (link-types.ts).
// It fails on the code the issue was filed against (no ICE servers, before bcba4d8): run with the
// server's --stun/--turn left out, every ring round aborts ("could not open links") and only star
// rounds commit. On main at fd524cf, which has --stun/--turn, it passes.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { waitFor } from '@tabfleet/server/testing';
import { startLabCluster, type LabCluster } from './lab-cluster';
import { isRelayed, selectedPairs, type SelectedPair } from './link-types';
import { committedRounds, roundsOf, RING_JOB, tabLog } from './lab-jobs';

const TABS = 4;
const REFLEXIVE = ['srflx', 'prflx'];
let cluster: LabCluster;
before(async () => {
  cluster = await startLabCluster({ homes: Array.from({ length: TABS }, () => ({ nat: 'eim' as const })) });
});
after(() => cluster?.close());

test('tabs behind endpoint-independent NATs commit ring syncs over srflx links, no relay, no star', { timeout: 12 * 60_000 }, async () => {
  const { server } = cluster;
  const job = await server.createJob({ ...RING_JOB, minWorkers: TABS, maxWorkers: TABS });
  await cluster.openTabs(tabLog);
  await waitFor('two ring syncs commit', async () => (await committedRounds(server, job.id, 'ring')) >= 2, 8 * 60_000, 1000)
    .catch(async (e: Error) => assert.fail(`${e.message}\nrounds: ${JSON.stringify(await roundsOf(server, job.id))}\nserver log:\n${server.logTail()}`));
  assert.deepEqual((await roundsOf(server, job.id)).filter((r) => r.mode === 'star'), [], 'no star round');
  for (const tab of cluster.tabs) {
    // ICE may select a relayed pair that answered first and move to the reflexive one once its checks
    // pass (seen here once): the link must settle on the reflexive pair.
    const direct = (p: SelectedPair) => !isRelayed(p) && REFLEXIVE.includes(p.local) && REFLEXIVE.includes(p.remote);
    let pairs: SelectedPair[] = [];
    await waitFor(`${tab.label}'s two links use reflexive pairs`, async () => (pairs = await selectedPairs(tab.page)).length >= 2 && pairs.every(direct), 60_000, 500)
      .catch((e: Error) => assert.fail(`${e.message}: ${JSON.stringify(pairs)}`));
    console.log(`${tab.label}: ${JSON.stringify(pairs)}`);
    assert.deepEqual(tab.errors, []);
  }
});
