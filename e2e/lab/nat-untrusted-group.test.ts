// Must show (issue 36): an untrusted job's robust group averaging across NATs. Four volunteer tabs, each
// its own headless Chromium in its own home of the network lab: two homes behind endpoint-independent
// NATs and two behind symmetric ones. The job is untrusted (the default: centered-clip over per-part
// owners, the server cross-checking digests and having validators recompute parts), so every sync is
// a group round over all-to-all links: the two EIM tabs meet on reflexive candidates (STUN), the two
// symmetric tabs only through coturn's relays. Group rounds commit with all four as members, no round
// goes through the star, the links the members report to the server are both direct and relayed, and
// the validators' and digests' checks ran without refusing or removing anyone.
// It fails on the code the issue was filed against (no ICE servers, before bcba4d8): the tabs offer only
// their LAN addresses, no group link opens, and no group round commits. Checked on this branch with the
// server's --stun/--turn left out (lab-cluster.ts): the group rounds failed and the syncs went through the
// star (two star rounds committed), which the test refuses.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { JobSummary, LinkPath, LinkSummary, WorkerRow } from '@tabfleet/protocol';
import { parseSamples, sampleValue, waitFor } from '@tabfleet/server/testing';
import { startLabCluster, type LabCluster } from './lab-cluster';
import { roundsOf, tabLog } from './lab-jobs';

const NATS = ['eim', 'eim', 'symmetric', 'symmetric'] as const;
const TABS = NATS.length;
let cluster: LabCluster;
before(async () => {
  cluster = await startLabCluster({
    homes: NATS.map((nat) => ({ nat })),
    // The lab's homes have distinct public addresses, but all in 198.51.100.0/24: under the default
    // rule (a /24 is one network) they would be one network, which may never be a majority of an
    // untrusted job's members, and the second tab would be refused. On the internet homes sit in
    // different networks; /32 (and /128) makes each home's address its own network, as they would be.
    serverArgs: ['--network-prefix', '32,128'],
  });
});
after(() => cluster?.close());

interface Round {
  roundId: number;
  mode: string;
  outcome: string;
  members: string[];
  detail: string;
}

test('an untrusted job averages in checked group rounds across EIM and symmetric NATs, over direct and relayed links', { timeout: 14 * 60_000 }, async () => {
  const { server } = cluster;
  const job = await server.createJob({
    preset: 'mlp-fashion', dataset: 'synthetic-blobs', strategy: 'localsgd', H: 2, pacing: 'fixed', hyperparameters: { lr: 0.05, batchSize: 32 },
    targetSteps: 100_000, minWorkers: TABS, maxWorkers: TABS,
  });
  assert.equal(job.spec.trust, 'untrusted');
  assert.equal(job.spec.aggregation, 'centered-clip');
  await cluster.openTabs(tabLog);
  const rounds = async () => (await roundsOf(server, job.id)) as unknown as Round[];
  const committed = async () => (await rounds()).filter((r) => r.outcome === 'committed');
  await waitFor('two group rounds commit', async () => (await committed()).length >= 2, 9 * 60_000, 1000)
    .catch(async (e: Error) => assert.fail(`${e.message}\nrounds: ${JSON.stringify(await rounds())}\nserver log:\n${server.logTail()}`));

  const ids: string[] = [];
  for (const tab of cluster.tabs) {
    const id = await tab.volunteerId();
    assert.ok(id, `${tab.label} has a volunteer id`);
    ids.push(id);
  }
  const all = await rounds();
  assert.deepEqual(all.filter((r) => r.mode !== 'group'), [], 'every round is a group round: none through the star');
  for (const r of await committed()) {
    assert.deepEqual([...r.members].sort(), [...ids].sort(), `round ${r.roundId} has every tab as a member`);
    // A committed round's detail is the parameters' checksum the members agreed on.
    assert.match(r.detail, /^[0-9a-f]{16}$/, `round ${r.roundId}: ${r.detail}`);
  }

  // The paths: each member reports its three group links (after a round, so wait for the reports). The
  // EIM pair meets on reflexive candidates, the symmetric pair through coturn.
  const read = async () => (await server.api(`/api/jobs/${job.id}`)).body as { job: JobSummary & { links: LinkSummary }; workers: WorkerRow[] };
  await waitFor('every member reports its three links', async () => {
    const { workers } = await read();
    return workers.length === TABS && workers.every((w) => w.links?.length === TABS - 1);
  }, 120_000, 500).catch(async (e: Error) => assert.fail(`${e.message}: ${JSON.stringify((await read()).workers.map((w) => w.links))}`));
  const { job: summary, workers } = await read();
  const link = (a: number, b: number): LinkPath => {
    const l = workers.find((w) => w.volunteerId === ids[a])!.links!.find((x) => x.peer === ids[b]);
    assert.ok(l, `${cluster.tabs[a].label} reports its link to ${cluster.tabs[b].label}`);
    return l;
  };
  console.log(`links: ${JSON.stringify(summary.links)}`);
  for (const [a, b] of [[0, 1], [1, 0]]) {
    const l = link(a, b);
    assert.ok(l.local !== 'relay' && l.remote !== 'relay' && l.local !== 'host', `the EIM homes' link is direct and reflexive: ${JSON.stringify(l)}`);
  }
  for (const [a, b] of [[2, 3], [3, 2]]) {
    const l = link(a, b);
    assert.ok(l.local === 'relay' || l.remote === 'relay', `the symmetric homes' link is relayed: ${JSON.stringify(l)}`);
  }
  assert.equal(summary.links.total, (TABS * (TABS - 1)) / 2);
  assert.ok(summary.links.direct >= 1 && summary.links.relayed >= 1, `direct and relayed links: ${JSON.stringify(summary.links)}`);

  // The checks ran and convicted nobody: every committed group round of four had validators recompute
  // parts (a round of two or more always has at least one check), no digests disagreed, no owner
  // refused a contribution, no dispute, nobody removed; the four are still the job's members.
  const samples = parseSamples((await server.api('/metrics')).text);
  const counter = (name: string) => sampleValue(samples, `tabfleet_${name}_total`);
  const groupsCommitted = sampleValue(samples, 'tabfleet_rounds_committed_total', { mode: 'group' });
  assert.ok(groupsCommitted >= 2, `group rounds committed: ${groupsCommitted}`);
  assert.ok(counter('rounds_validated') >= groupsCommitted, `validated ${counter('rounds_validated')} of ${groupsCommitted} committed group rounds`);
  for (const name of ['checksum_mismatches', 'digest_mismatches', 'contributions_refused', 'validation_disputes', 'accusations_unsettled', 'members_evicted', 'members_sat_out']) {
    assert.equal(counter(name), 0, name);
  }
  assert.equal(all.filter((r) => /digest|refused|validat|evict/i.test(r.detail)).length, 0, `no round was refused by a check: ${JSON.stringify(all)}`);
  assert.deepEqual(workers.map((w) => w.volunteerId).sort(), [...ids].sort(), 'every tab is still a member');
  for (const tab of cluster.tabs) assert.deepEqual(tab.errors, [], tab.label);
});
