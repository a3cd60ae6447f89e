// Streaming DiLoCo end to end (issue 38): three volunteer runtimes train a trusted DiLoCo job whose
// model is cut into two fragments, one synced per sync as 4-bit E2M1 with an overlap of one step,
// against the real server through real Ring collectives (in-memory transport). Every sync commits with
// one checksum, each sends (N−1) × its fragment's encoding, and the evaluators' digests of the global
// model (not the parameters, which carry local progress) agree, so the checkpoints verify and the job
// ends. A volunteer that cannot open links sends the round through the server's star, whose update
// is the sync's fragment, checked against that fragment's length.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import { CHECKPOINT_SYNC_HEADER, jobSpecSchema, modelFragments, PRESET_LAYOUTS, quantizedBytes, verifyCheckpoint } from '@tabfleet/protocol';
import { startTestServer, waitFor, type TestServer } from '@tabfleet/server/testing';
import { nodeVolunteer } from '@tabfleet/worker/testing';

let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 20_000, barrierTimeoutMs: 60_000, loadTimeoutMs: 30_000 } });
});
after(() => server.stop());

const SYNCS = 6;
const job = {
  dataset: 'synthetic-blobs' as const, preset: 'mlp-fashion' as const, strategy: 'diloco' as const, H: 2, trust: 'trusted' as const,
  compression: 'e2m1' as const, fragments: 2, overlapSteps: 1, minWorkers: 3, maxWorkers: 3, targetSteps: 2 * SYNCS, checkpointEvery: 3, evalEverySteps: 6,
  hyperparameters: { optimizer: 'adamw' as const, lr: 1e-3, batchSize: 16 },
};
const fragments = modelFragments(PRESET_LAYOUTS['mlp-fashion'], 2);

interface Round { seq: number; outcome: string; mode: string; detail: string; members: string[] }

async function runJob(spec: object, transportOf: (net: MemoryNetwork) => Parameters<typeof nodeVolunteer>[1]) {
  const created = await server.createJob(spec);
  assert.equal(created.spec.pacing, 'fixed', 'a streaming job takes fixed rounds');
  const net = new MemoryNetwork();
  const vols = [0, 1, 2].map(() => nodeVolunteer(server.url, transportOf(net)));
  try {
    await waitFor('the job is done', async () => (await server.api(`/api/jobs/${created.id}`)).body.job.state === 'done', 150_000, 200);
    const rounds = (await server.api(`/api/jobs/${created.id}/rounds`)).body.rounds as Round[];
    for (const v of vols) assert.equal(v.runtime.status.lastError, null, `${v.runtime.status.volunteerId}: ${v.runtime.status.lastError}\n${server.logTail()}`);
    return { rounds, vols, jobId: created.id };
  } finally {
    for (const v of vols) v.runtime.stop();
    await server.api(`/api/jobs/${created.id}/stop`, { method: 'POST' }).catch(() => {});
  }
}

test('three volunteers stream E2M1 fragments: every sync commits, each sends its fragment\'s encoding, the checkpoints verify', { timeout: 180_000 }, async () => {
  const { rounds, vols, jobId } = await runJob(job, (net) => net);
  const committed = rounds.filter((r) => r.outcome === 'committed');
  assert.equal(committed.length, SYNCS, JSON.stringify(rounds));
  assert.ok(committed.every((r) => r.mode === 'ring' && r.members.length === 3), JSON.stringify(committed));
  assert.equal(new Set(committed.map((r) => r.detail)).size, SYNCS, 'every sync moved its fragment');
  // Syncs 1, 3, 5 carry fragment 0; 2, 4, 6 fragment 1.
  const payloads = committed.reduce((a, r) => a + 2 * quantizedBytes(fragments[(r.seq - 1) % 2].length, 'e2m1'), 0);
  for (const v of vols) {
    const { bytesSent, volunteerId } = v.runtime.status;
    assert.ok(bytesSent >= payloads && bytesSent < payloads * 1.02, `${volunteerId} sent ${bytesSent}, its fragments' encodings ${payloads}`);
  }
  // The server keeps a checkpoint only when its digest is the one the evaluators agreed on: the last
  // sync's is every member's global model, and no member's parameters (fragment 0 moved on since).
  const res = await fetch(`${server.url}/api/jobs/${jobId}/checkpoint`, { headers: { authorization: 'Bearer test-token' } });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get(CHECKPOINT_SYNC_HEADER), String(SYNCS));
  const { digest } = verifyCheckpoint(jobSpecSchema.parse({ ...job }), new Uint8Array(await res.arrayBuffer()));
  for (const v of vols) assert.equal(await v.engine.digest(), digest);
  // Each round's first step ran during the last exchange (overlapSteps 1) and the rest after the
  // commit: H steps a sync, none past the target (the last round starts no steps ahead).
  for (const v of vols) assert.equal(await v.engine.currentStep(), 2 * SYNCS);
  const metrics = (await server.api(`/api/jobs/${jobId}/metrics`)).body.points as { accuracy: number | null }[];
  assert.ok(metrics.filter((p) => p.accuracy !== null).length >= 2, 'the global model was evaluated');
});

test('a volunteer that cannot open links sends its fragment through the star, checked against the fragment\'s length', { timeout: 180_000 }, async () => {
  let cut: string | null = null;
  const { rounds } = await runJob(job, (net) => (id) => {
    const transport = net.endpoint(id);
    cut ??= id;
    if (id === cut) transport.connect = () => Promise.reject(new Error('unreachable: no route (test)'));
    return transport;
  });
  const committed = rounds.filter((r) => r.outcome === 'committed');
  assert.equal(committed.length, SYNCS, JSON.stringify(rounds));
  const starSeqs = committed.filter((r) => r.mode === 'star').map((r) => r.seq);
  assert.ok(starSeqs.some((s) => s % 2 === 1) && starSeqs.some((s) => s % 2 === 0), `star rounds of both fragments: ${JSON.stringify(rounds)}`);
});
