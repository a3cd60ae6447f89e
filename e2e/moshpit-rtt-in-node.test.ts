// Groups from measured round trips, end to end: eight volunteer runtimes (Node, CPU backend) in a
// regional Moshpit job that none of them gives a region hint. Their links (the in-memory transport)
// are fast inside two "sites" of four and slow across. Each ring pings its links as it connects, the
// runtimes report the round trips in their round results, and the server clusters them: once it has
// seen enough links, the grid's low axis (groups of four) averages inside a site.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import type { RoundBegin } from '@tabfleet/protocol';
import { startTestServer, waitFor, type TestServer } from '@tabfleet/server/testing';
import { nodeVolunteer } from '@tabfleet/worker/testing';

let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 20_000, barrierTimeoutMs: 60_000, loadTimeoutMs: 30_000 } });
});
after(() => server.stop());

const FAR_MS = 40, NEAR_MS = 1;
const SYNCS = 14;

test('a regional Moshpit job with no region hints groups its volunteers by the round trips their links measured', { timeout: 240_000 }, async () => {
  const created = await server.createJob({
    dataset: 'synthetic-blobs', preset: 'mlp-fashion', strategy: 'localsgd', H: 1, pacing: 'fixed', hyperparameters: { lr: 0.05, batchSize: 16 },
    trust: 'trusted', groupSize: 4, regionalGroups: true, minWorkers: 8, maxWorkers: 8, targetSteps: SYNCS, checkpointEvery: 1000, evalEverySteps: 1000,
  });
  // Every link starts slow; once the volunteers have ids, links inside a site are made fast. A round
  // trip measured slow early is no harm: the smallest one seen is what counts.
  const net = new MemoryNetwork({ faults: { latencyMs: FAR_MS } });
  const vols = Array.from({ length: 8 }, () => nodeVolunteer(server.url, net));
  const begins: RoundBegin[] = [];
  vols[0].socket.on('round:begin', (r: RoundBegin) => begins.push(r));
  try {
    const ids = await waitFor('every volunteer has an id', () => (vols.every((v) => v.runtime.status.volunteerId) ? vols.map((v) => v.runtime.status.volunteerId!) : null), 60_000, 20);
    const siteOf = new Map(ids.map((id, i) => [id, i < 4 ? 'A' : 'B']));
    for (const a of ids) for (const b of ids) if (a < b && siteOf.get(a) === siteOf.get(b)) net.setFaults(a, b, { latencyMs: NEAR_MS });
    await waitFor('the job is done', async () => (await server.api(`/api/jobs/${created.id}`)).body.job.state === 'done', 200_000, 200);
    for (const v of vols) assert.equal(v.runtime.status.lastError, null, `${v.runtime.status.volunteerId}: ${v.runtime.status.lastError}\n${server.logTail()}`);

    // Eight members in groups of four: a 4 × 2 grid, odd syncs along the axis of four. vols[0] saw its
    // own group's begin each sync; the rounds table has every group's members.
    const rounds = (await server.api(`/api/jobs/${created.id}/rounds`)).body.rounds as { seq: number; outcome: string; detail: string }[];
    assert.deepEqual(rounds.filter((r) => r.outcome === 'committed').map((r) => r.seq), Array.from({ length: SYNCS }, (_, i) => i + 1));
    const sitesIn = (r: RoundBegin) => new Set(r.members.map((id) => siteOf.get(id))).size;
    const axis0 = begins.filter((r) => r.seq % 2 === 1 && r.members.length === 4);
    const mixed = axis0.filter((r) => sitesIn(r) > 1).map((r) => r.seq);
    console.log(`groups of four spanning both sites at syncs ${mixed.join(', ') || 'none'} of ${axis0.map((r) => r.seq).join(', ')}`);
    // From sync 7 on (three syncs of links measured), every group of four is one site.
    const late = axis0.filter((r) => r.seq >= 7);
    assert.ok(late.length >= 3, `axis-0 syncs seen: ${axis0.map((r) => r.seq)}`);
    for (const r of late) assert.equal(sitesIn(r), 1, `sync ${r.seq}: ${r.members.map((id) => siteOf.get(id)).join('')}`);
    // The high axis still averages across the sites (pairs of one from each).
    for (const r of begins.filter((r) => r.seq >= 7 && r.seq % 2 === 0)) assert.equal(sitesIn(r), 2, `sync ${r.seq} pairs across sites`);
  } finally {
    for (const v of vols) v.runtime.stop();
    await server.api(`/api/jobs/${created.id}/stop`, { method: 'POST' }).catch(() => {});
  }
});
