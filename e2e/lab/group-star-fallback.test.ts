// Groups' last resort, in the network lab: an untrusted job (robust group averaging, centered-clip)
// with three Chromium tabs behind symmetric NATs and no TURN server answering (the server names coturn,
// but it is down). A group needs a link between every two members and none opens, so each group
// attempt fails with corroborated `unreachable` claims and the sync runs as a star round, which the
// server combines with the job's robust rule (docs/protocol.md, "Groups' last resort"): star syncs
// commit, nobody is evicted for it, and the job goes on.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { waitFor } from '@tabfleet/server/testing';
import { startLabCluster, type LabCluster } from './lab-cluster';
import { committedRounds, roundsOf, RING_JOB, tabLog } from './lab-jobs';

const TABS = 3;
let cluster: LabCluster;
before(async () => {
  // Every home is a network of its own (the lab's WAN addresses share one /24, which an untrusted job would take for one network).
  cluster = await startLabCluster({ homes: Array.from({ length: TABS }, () => ({ nat: 'symmetric' as const })), turn: 'down', serverArgs: ['--network-prefix', '32,128'] });
});
after(() => cluster?.close());

test('an untrusted job whose group links cannot open commits star syncs combined by its robust rule', { timeout: 12 * 60_000 }, async () => {
  const { server } = cluster;
  const job = await server.createJob({ ...RING_JOB, trust: 'untrusted', minWorkers: TABS, maxWorkers: TABS });
  assert.equal((await server.api(`/api/jobs/${job.id}`)).body.job.spec.aggregation, 'centered-clip');
  await cluster.openTabs(tabLog);
  const why = async () => `rounds: ${JSON.stringify(await roundsOf(server, job.id))}\nserver log:\n${server.logTail()}`;
  await waitFor('two star syncs commit', async () => (await committedRounds(server, job.id, 'star')) >= 2, 8 * 60_000, 1000)
    .catch(async (e: Error) => assert.fail(`${e.message}\n${await why()}`));
  const rounds = await roundsOf(server, job.id);
  const groups = rounds.filter((r) => r.mode === 'group' && r.outcome !== 'running');
  assert.ok(groups.length >= 1, await why());
  assert.deepEqual(groups.filter((r) => r.outcome === 'committed'), [], 'no group round committed: their links cannot open');
  for (const r of groups) assert.match(JSON.stringify(r), /unreachable: could not open links/, await why());
  const workers = (await server.api(`/api/jobs/${job.id}`)).body.workers as unknown[];
  assert.equal(workers.length, TABS, 'nobody was evicted for the fallback');
  for (const tab of cluster.tabs) assert.deepEqual(tab.errors, []);
});
