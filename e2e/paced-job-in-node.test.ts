// Paced rounds against the real server: three volunteers (the worker runtime on the CPU backend,
// in-memory links), one slowed 4× (it sleeps beside its compute). In a paced job the server measures
// each member's time per step and gives it the steps that fit the round's budget: the slow one does a
// fraction of the fast ones' steps, its contribution weighs its share of the samples, every member ends
// each sync with the same model, the worker table shows pace and share, the job summary the predicted
// sync time beside the actual, and the job trains on more samples per second than with fixed H, where
// every sync waits on the slow member. (In one Node process a member's wall time includes the others'
// compute, so the slow member measures slower than 4×.) An untrusted paced job weighs the members in
// its robust rule (owners, validators and the server alike) and its group rounds commit as usual. A
// paced ddp job gives members micro-batches of the global batch instead of local steps (its slow member 10×).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import type { JobSummary, WorkerRow } from '@tabfleet/protocol';
import { MAX_STEPS_FACTOR, startTestServer, waitFor, type TestServer } from '@tabfleet/server/testing';
import { nodeVolunteer } from '@tabfleet/worker/testing';

let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 30_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 60_000 } });
});
after(() => server.stop());

const SLOWDOWNS = [1, 1, 4];
const SYNCS = 8;

/** Runs a job with the three volunteers to `syncs` syncs; its samples per second after the first 4 (which measure the paces), its rounds and workers. */
async function run(
  pacing: 'fixed' | 'paced' | 'auto', trust: 'trusted' | 'untrusted' = 'trusted', syncs = SYNCS, strategy: 'localsgd' | 'ddp' = 'localsgd', net = new MemoryNetwork(),
  slowdowns = SLOWDOWNS,
) {
  const job = await server.createJob({
    name: pacing, trust, strategy, H: strategy === 'ddp' ? 1 : 8, pacing, hyperparameters: { lr: 0.05, batchSize: 32 },
    minWorkers: 3, maxWorkers: 3, targetSteps: 1_000_000, evalEverySteps: 1_000_000, checkpointEvery: 1_000,
  });
  const vols = slowdowns.map((slowdown) => nodeVolunteer(server.url, net, { jobId: job.id, slowdown }));
  try {
    const summary = async () => (await server.api(`/api/jobs/${job.id}`)).body as { job: JobSummary; workers: WorkerRow[] };
    await waitFor(`${pacing}: 4 syncs`, async () => (await summary()).job.seq >= 4, 240_000, 100);
    const start = { step: (await summary()).job.step, at: Date.now() };
    await waitFor(`${pacing}: ${syncs} syncs`, async () => (await summary()).job.seq >= syncs, 240_000, 100);
    const { job: j, workers } = await summary();
    // The job's step is each sync's mean steps per member: × members × batch = samples.
    const samplesPerSec = ((j.step - start.step) * slowdowns.length * 32 * 1000) / (Date.now() - start.at);
    const rounds = ((await server.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { seq: number; outcome: string; detail: string }[]).filter((r) => r.outcome === 'committed');
    for (const v of vols) assert.equal(v.runtime.status.lastError, null, `${v.runtime.status.volunteerId}: ${v.runtime.status.lastError}`);
    const byVolunteer = vols.map((v) => workers.find((w) => w.volunteerId === v.runtime.status.volunteerId)!);
    return { job: j, rounds, samplesPerSec, workers: byVolunteer, vols };
  } finally {
    for (const v of vols) v.runtime.stop();
    await server.api(`/api/jobs/${job.id}/stop`, { method: 'POST' }).catch(() => {});
  }
}

test('a paced job gives each member the steps its pace allows, weighs them by samples, predicts the sync time, and trains faster than fixed H', { timeout: 600_000 }, async () => {
  const paced = await run('paced');
  const [fastA, fastB, slow] = paced.workers.map((w) => w.pace!);
  const t = paced.job.syncTime!;
  console.log(`paced: ${paced.workers.map((w) => `${w.pace!.msPerStep} ms/step, ${w.pace!.steps} steps, share ${w.pace!.share}`).join('; ')}; ` +
    `${paced.samplesPerSec.toFixed(0)} samples/s; sync time predicted ${t.last?.predictedMs} ms, took ${t.last?.actualMs} ms, median error ${t.medianError}`);
  // The budget is at least H = 8 steps of the fastest member's measured pace (more when the exchange
  // and the rest would take over a twentieth of the sync), and members stop at it: the fast ones do
  // about that (fewer when their steps run slower than measured; in one process they share the CPU),
  // the slow one a fraction of it. At most twice the MAX_STEPS_FACTOR × H they may be given.
  assert.ok(Math.min(fastA.steps, fastB.steps) >= 3 && Math.max(fastA.steps, fastB.steps) <= 2 * MAX_STEPS_FACTOR * 8, `fast members do ${fastA.steps} and ${fastB.steps} steps`);
  // A fraction of the fast ones' steps: a third of the faster's, fewer than the slower's (beside another
  // CPU-bound job one fast member's measured pace may fall to half the other's: 51 and 126 ms/step).
  const slowShare = `the slow member does ${slow.steps} steps, the fast ones ${fastA.steps} and ${fastB.steps}`;
  assert.ok(slow.steps >= 1 && 3 * slow.steps <= Math.max(fastA.steps, fastB.steps) && slow.steps < Math.min(fastA.steps, fastB.steps), slowShare);
  assert.ok(t.last !== null && t.medianError !== null, 'the job summary shows the predicted sync time beside the actual');
  assert.ok(slow.msPerStep! > 2.5 * Math.min(fastA.msPerStep!, fastB.msPerStep!), 'its measured pace is the slow one');
  const shares = fastA.share! + fastB.share! + slow.share!;
  assert.ok(Math.abs(shares - 1) < 1e-9 && slow.share! < 0.25, `shares ${fastA.share}, ${fastB.share}, ${slow.share}`);
  // Weighted by samples and still one model: every sync's members agree on its checksum.
  assert.ok(paced.rounds.every((r) => !/mismatch/.test(r.detail)), paced.rounds.map((r) => r.detail).join('; '));
  const distinct = new Set(paced.vols.map((v) => v.runtime.status.seq));
  assert.ok(distinct.size <= 2, 'members are at most one sync apart');

  const fixed = await run('fixed');
  console.log(`fixed H: ${fixed.samplesPerSec.toFixed(0)} samples/s; paced: ${paced.samplesPerSec.toFixed(0)}`);
  assert.ok(fixed.workers.every((w) => w.pace === null), 'a fixed job shows no pace');
  // Fixed H: the fast members idle while the slow one does its 8 steps; paced, they train meanwhile
  // (1.4–1.6× the samples per second measured here; the figure is the benchmark's to hold, not this test's).
  assert.ok(paced.samplesPerSec > fixed.samplesPerSec, `paced ${paced.samplesPerSec} vs fixed ${fixed.samplesPerSec} samples/s`);
});

test('a paced ddp job splits the global batch in micro-batches by pace: the slow member computes fewer, one optimizer step per sync, one model', { timeout: 300_000 }, async () => {
  // 10× slower, not 4×: a micro-batch is short, and in one process a fast member's measured pace takes
  // in the others' compute it waited behind. Beside a CPU-bound job the fast ones measured 33 and 33.5
  // ms while the 4× member, slowed by 4× its own compute, measured 27.1 (micro-batches 4, 4 and 5).
  const paced = await run('paced', 'trusted', 8, 'ddp', new MemoryNetwork(), [1, 1, 10]);
  const [fastA, fastB, slow] = paced.workers.map((w) => w.pace!);
  console.log(`paced ddp: micro-batches ${fastA.steps}, ${fastB.steps}, ${slow.steps}; ${paced.workers.map((w) => `${w.pace!.msPerStep} ms/micro-batch`).join(', ')}`);
  // Fewer than the faster fast member: beside another CPU-bound job one fast member's measured pace
  // fell below the slow one's (32.4 ms against 24.2 and 21.3: micro-batches 3, 5 and 4; a hog run).
  assert.ok(slow.steps < Math.max(fastA.steps, fastB.steps), 'the slow member computes its gradient on fewer micro-batches');
  // The global batch stays about members × batchSize: 3 × 4 micro-batches (rounding moves it by a few).
  const total = fastA.steps + fastB.steps + slow.steps;
  assert.ok(total >= 9 && total <= 15, `${total} micro-batches in the global batch`);
  assert.equal(paced.job.step, paced.job.seq, 'one optimizer step per sync');
  assert.ok(paced.rounds.every((r) => !/mismatch/.test(r.detail)), paced.rounds.map((r) => r.detail).join('; '));
});

test('an auto job on slow links picks the largest H and fp16 payloads from what it measured, and its members still agree', { timeout: 300_000 }, async () => {
  // 0.5 MB/s links: a ring of 3 moves 2·2/3 of the MLP's 814 KB per member, ~2.2 s at fp32 and ~1.1 s
  // at fp16, against steps of ~40 ms: H would have to be ≥ 490 (fp32) or ≥ 245 (fp16) to keep the
  // exchange a tenth of the sync: the largest candidate (MAX_STEPS_FACTOR × H = 64), at the precision
  // measured faster. That holds while the fastest member's steps take under ~300 ms (7× the quiet
  // machine's): at 2 MB/s a CI run with a CPU-bound job beside it measured steps slow enough for H 32. fp16 is tried once fp32 is measured (predicted at half its time); what a round
  // takes here also holds the slowed member's apply and this machine's load, so which precision ends
  // up measured faster is not asserted.
  const auto = await run('auto', 'trusted', 6, 'localsgd', new MemoryNetwork({ faults: { bandwidth: 0.5e6 } }));
  const a = auto.job.syncTime!.auto!;
  console.log(`auto: H ${a.H}, ${a.dtype}; exchange measured f32 ${a.exchangeMs.f32?.toFixed(0)} ms, f16 ${a.exchangeMs.f16?.toFixed(0)} ms; steps ` +
    `${auto.workers.map((w) => w.pace!.steps).join(', ')}`);
  assert.equal(a.H, MAX_STEPS_FACTOR * 8);
  assert.ok(a.exchangeMs.f32 !== null && a.exchangeMs.f16 !== null, 'syncs ran at both precisions');
  assert.equal(a.dtype, a.exchangeMs.f16 < a.exchangeMs.f32 ? 'f16' : 'f32', 'the precision measured faster');
  // Members stop at the round's budget, so on a loaded machine (steps slower than their measured pace)
  // they do fewer than the H planned: CI saw 18 of 32 once, 24 or more other times (at MAX_STEPS_FACTOR 4).
  assert.ok(Math.max(...auto.workers.map((w) => w.pace!.steps)) >= a.H / 4, 'the fastest members do at least a quarter of H steps');
  // fp16 rounds included, every member applied the same model.
  assert.ok(auto.rounds.length >= 6 && auto.rounds.every((r) => !/mismatch/.test(r.detail)), auto.rounds.map((r) => r.detail).join('; '));
});

test('an untrusted paced job weighs members in its robust rule: owners and validators agree, nobody is evicted', { timeout: 300_000 }, async () => {
  const paced = await run('paced', 'untrusted', 6);
  const [fastA, fastB, slow] = paced.workers.map((w) => w.pace!);
  console.log(`untrusted paced: steps ${fastA.steps}, ${fastB.steps}, ${slow.steps}; ${paced.samplesPerSec.toFixed(0)} samples/s`);
  assert.ok(slow.steps < Math.min(fastA.steps, fastB.steps), 'the slow member does fewer steps');
  assert.ok(paced.workers.every((w) => w.faults === 0 && w.state !== 'left'), JSON.stringify(paced.workers.map((w) => [w.state, w.faults])));
  assert.ok(paced.rounds.every((r) => !/mismatch/.test(r.detail)), paced.rounds.map((r) => r.detail).join('; '));
});
