// Redundant recompute against identities that cost nothing: a member that never uploads the unit it
// was given is faulted and not credited for it, and a tie is broken only by a member with standing
// on a third network (before: no fault and full credit; two Sybils of one address won every tie).
import assert from 'node:assert/strict';
import { after, afterEach, before, test } from 'node:test';
import type { ReplicaTask } from '@tabfleet/protocol';
import { waitFor, type SimOptions, type SimVolunteer } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer({
    networkRules: { v4: 32, v6: 128 }, addressLimits: { connections: 100, jobShare: 0.5 }, replicationRate: { probation: 1, trusted: 1 },
    timing: { roundTimeoutMs: 10_000, barrierTimeoutMs: 10_000, loadTimeoutMs: 10_000 },
  });
});
after(() => server.stop());
afterEach(() => server.stopJobs());

const at = (host: number, clientId: string, opts: Partial<SimOptions> = {}) => server.volunteer({ localAddress: `127.0.0.${host}`, clientId, ...opts });
const faultsOf = async (clientId: string) => (await server.store.reputations([clientId])).get(clientId)?.faults ?? 0;

async function startJob(sims: SimVolunteer[]) {
  const job = await server.createJob({ minWorkers: sims.length, maxWorkers: sims.length + 1, H: 1, targetSteps: 1000 });
  for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
  return job;
}

test('a member that never uploads its replicated unit gets a fault and no credit for the sync the unit was', async () => {
  const honest = await Promise.all([2, 3, 4].map((h) => at(h, `honest-uploader-${h}`)));
  const shirker = await at(5, 'never-uploads-000');
  // It takes the unit like any work, and then never sends its delta.
  const send = shirker.emit.bind(shirker);
  shirker.emit = ((name, payload) => (name === 'replica:upload' ? Promise.resolve({ ok: true }) : send(name, payload))) as typeof shirker.emit;
  const job = await startJob([...honest, shirker]);
  await waitFor('two missing uploads', () => server.metrics.get('replicas_missing') >= 2, 90_000);
  // Faults and the contributor ledger are written behind the coordinator: read once they are in (on
  // a busy machine the second fault was still queued when the counter showed it).
  await server.hub.flushed();
  // Before: no fault, and its credit was the same as everyone's.
  assert.ok((await faultsOf('never-uploads-000')) >= 2, `faults of the shirker: ${await faultsOf('never-uploads-000')}`);
  for (const h of [2, 3, 4]) assert.equal(await faultsOf(`honest-uploader-${h}`), 0);
  const missing = server.metrics.get('replicas_missing');
  const credited = (await server.store.contributors(job.id)).find((c) => c.clientId === 'never-uploads-000')!;
  const rounds = (await server.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { outcome: string; members: string[] }[];
  const syncsIn = rounds.filter((r) => r.outcome === 'committed' && r.members.includes(shirker.volunteerId)).length;
  // Each missing upload withholds the credit of the sync its unit was (read after at least two).
  assert.ok(credited.syncs <= syncsIn - Math.min(2, missing), `credited for ${credited.syncs} of the ${syncsIn} syncs it was in (${missing} missing uploads)`);
});

test('a tie between a Sybil and an honest member is broken only by a member with standing on a third network', async () => {
  const lie: Partial<SimOptions> = { replica: (honest) => honest.map((v) => v * 3) };
  const honest = await Promise.all([2, 3, 4].map((h) => at(h, `honest-tie-breaker-${h}`)));
  for (let i = 0; i < 10; i++) await server.store.addReputation('honest-tie-breaker-4', { verified: 1 });
  const sybils = [await at(9, 'sybil-tie-breaker-a', lie), await at(9, 'sybil-tie-breaker-b', lie)];
  await startJob([...honest, ...sybils]);
  await waitFor('three disagreements', () => server.metrics.get('replicas_disagreed') >= 3, 120_000);
  // A unit is open at most 3 syncs: 4 more settle every tie asked so far.
  const upTo = honest[0].committed.length + 4;
  await waitFor('the ties settle', () => honest[0].committed.length >= upTo, 60_000);
  // Before: the other Sybil could be the third, agree with the first, and the honest member took the fault.
  for (const h of [2, 3, 4]) assert.equal(await faultsOf(`honest-tie-breaker-${h}`), 0, `honest-tie-breaker-${h}`);
  const sims = [...honest, ...sybils];
  const byUnit = new Map<string, SimVolunteer[]>();
  for (const e of sims.flatMap((s) => s.events.filter((x) => x.name === 'work:replicate').map((x) => ({ s, at: x.at, unitId: (x.payload as ReplicaTask).unit.unitId })))
    .sort((a, b) => a.at - b.at)) byUnit.set(e.unitId, [...(byUnit.get(e.unitId) ?? []), e.s]);
  const ties = [...byUnit.values()].filter((asked) => asked.length === 3);
  assert.ok(ties.length >= 1 || server.metrics.get('replicas_unresolved') >= 1, 'ties were asked');
  // Only honest members can be a third here: both Sybils share a network, and one of them is in every
  // disagreement. (Honest members other than honest[2] earn standing as their parts are confirmed.)
  for (const [original, replica, third] of ties) {
    assert.ok(honest.includes(third), 'a tie-breaker is never of the Sybils\' network');
    assert.ok(third !== original && third !== replica);
  }
  for (const [, asked] of byUnit) assert.ok(!(sybils.includes(asked[0]) && sybils.includes(asked[1])), 'original and replica are never of one network');
});
