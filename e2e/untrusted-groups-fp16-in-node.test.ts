// fp16 in untrusted Moshpit groups through the real path: four worker runtimes (the tab's code, CPU
// backend, in-memory links) train an untrusted job with compression fp16 in checked groups of two
// against the real server. Every frame of every group op (the owners' scatter and gather, the
// validators' contributions) goes as f16; the owners decode to f32, combine by CenteredClip and
// round the aggregate to f16, validators recompute alike (the server names one part per group round
// and commits only when its digest agrees), and the stored checkpoint is a group's f16-exact mean.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import { decodeFrame, jobSpecSchema, roundToF16, verifyCheckpoint, type FrameDTypeName, type FrameKindName } from '@tabfleet/protocol';
import { startTestServer, type TestServer } from '@tabfleet/server/testing';
import { nodeVolunteer } from '@tabfleet/worker/testing';

let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 30_000, barrierTimeoutMs: 60_000, loadTimeoutMs: 30_000 } });
});
after(() => server.stop());

const GROUP_OPS: readonly FrameKindName[] = ['groupScatter', 'groupGather', 'groupValidate'];

test('an untrusted fp16 job trains in checked groups of two with f16 on every group frame, validated, to an f16-exact checkpoint', { timeout: 300_000 }, async () => {
  const spec = {
    dataset: 'synthetic-blobs', preset: 'mlp-fashion', strategy: 'localsgd', H: 4, pacing: 'fixed', hyperparameters: { lr: 0.05, batchSize: 32 },
    minWorkers: 4, maxWorkers: 4, groupSize: 2, compression: 'fp16', targetSteps: 40, checkpointEvery: 2, evalEverySteps: 8,
  } as const;
  const created = await server.createJob(spec);
  assert.deepEqual([created.spec.trust, created.spec.compression, created.spec.aggregation], ['untrusted', 'fp16', 'centered-clip']);
  const net = new MemoryNetwork();
  // Every group frame's kind and dtype, as it went over a link.
  const seen = new Map<FrameKindName, Map<FrameDTypeName, number>>();
  net.tap((_from, _to, bytes) => {
    const f = decodeFrame(bytes);
    if (!GROUP_OPS.includes(f.kind)) return;
    const byDtype = seen.get(f.kind) ?? new Map<FrameDTypeName, number>();
    byDtype.set(f.dtype, (byDtype.get(f.dtype) ?? 0) + 1);
    seen.set(f.kind, byDtype);
  });
  const vols = [0, 1, 2, 3].map(() => nodeVolunteer(server.url, net));
  try {
    await server.waitForJob(created.id, 'done', 280_000);
    const done = (await server.api(`/api/jobs/${created.id}`)).body.job;
    assert.equal(done.step, 40);
    for (const v of vols) assert.equal(v.runtime.status.lastError, null, `${v.runtime.status.volunteerId}: ${v.runtime.status.lastError}\n${server.logTail()}`);
    const rounds = (await server.api(`/api/jobs/${created.id}/rounds`)).body.rounds as { seq: number; mode: string; outcome: string; detail: string }[];
    const committed = rounds.filter((r) => r.outcome === 'committed');
    assert.ok(committed.length >= 10 && committed.every((r) => r.mode === 'group'), JSON.stringify(rounds));
    assert.ok(committed.some((r) => r.detail === '2 of 2 groups committed'), JSON.stringify(committed));
    const workers = (await server.api(`/api/jobs/${created.id}`)).body.workers as { volunteerId: string; reputation: { verified: number; faults: number } | null }[];
    // Each identity's parts (as owner) and recomputations (as validator) were confirmed by checks, none found at fault.
    assert.equal(workers.length, 4);
    for (const w of workers) assert.ok(w.reputation && w.reputation.verified > 0 && w.reputation.faults === 0, `${w.volunteerId}: ${JSON.stringify(w.reputation)}`);

    // The wire: each op moved f16 values and nothing else.
    for (const kind of GROUP_OPS) {
      const byDtype = seen.get(kind);
      assert.ok(byDtype && (byDtype.get('f16') ?? 0) > 0, `${kind} frames went: ${JSON.stringify([...(byDtype ?? [])])}`);
      assert.deepEqual([...byDtype.keys()], ['f16'], `${kind} frames by dtype: ${JSON.stringify([...byDtype])}`);
    }

    // The checkpoint is a group's combined parameters, rounded to f16 by their owners (an f32 wire
    // would leave almost every one of its ~200k values off f16's grid).
    const res = await fetch(`${server.url}/api/jobs/${created.id}/checkpoint`, { headers: { authorization: 'Bearer test-token' } });
    assert.equal(res.status, 200);
    const { params } = verifyCheckpoint(jobSpecSchema.parse(spec), new Uint8Array(await res.arrayBuffer()));
    const rounded = Float32Array.from(params);
    roundToF16(rounded, 0, rounded.length);
    const off = params.findIndex((v, i) => v !== rounded[i]);
    assert.equal(off, -1, `parameter ${off} (${params[off]}) is not an f16 value`);
    const metrics = (await server.api(`/api/jobs/${created.id}/metrics`)).body.points as { accuracy: number | null }[];
    assert.ok(metrics.some((p) => p.accuracy !== null && p.accuracy > 0.5), 'an evaluation of a group\'s fp16 model was recorded');
  } finally {
    for (const v of vols) v.runtime.stop();
    await server.api(`/api/jobs/${created.id}/stop`, { method: 'POST' }).catch(() => {});
  }
});
