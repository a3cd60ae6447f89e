// Paced rounds in the in-process runner: a slowed worker does fewer local steps in the same budget,
// and the mean weighs every member's delta by the samples it processed. Timing runs on fake time,
// with a modeled device (each step costs STEP_MS), so the step counts are exact on a busy machine.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import { gaussianBlobs } from '@tabfleet/data';
import { encodeQuantized } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { CpuBackend, type DType, type Storage } from '@tabfleet/tensor';
import { holdOutTail } from './convergence';
import { scalePayload } from './exchange';
import { payloadToDense, type Payload } from './strategies';
import { runSyncs, startWorkers } from './simulate';
import { mlpWorkers, type JobSetup } from './workers';

const blobs = holdOutTail(gaussianBlobs(1224, 784, 10, 5), 200);
const job: JobSetup = {
  workers: 2, data: { train: blobs.head, test: blobs.tail }, batchSize: 8, seed: 2, optimizer: { kind: 'sgd', lr: 0.05, momentum: 0 },
  strategy: { strategy: 'localsgd', H: 4, compression: 'none', outerLr: 1, outerMomentum: 0 },
};

/** Fake ms a modeled step takes on the device. */
const STEP_MS = 5;

/**
 * The CPU reference as a device on fake time: a step is done when its loss is read back, and that
 * read costs STEP_MS of busy time (a one-value read after a commit does too; no step is timed there).
 */
class ModeledDevice extends CpuBackend {
  constructor(private readonly clock: FakeClock) {
    super();
  }

  override async read(s: Storage, dtype: DType): Promise<Float32Array | Int32Array> {
    const out = await super.read(s, dtype);
    if (out.length === 1) this.clock.spend(STEP_MS);
    return out;
  }
}

test('paced LocalSGD: a worker 4× slower does a quarter of the steps in the budget, and the mean weighs deltas by samples', async () => {
  const clock = new FakeClock();
  const workers = mlpWorkers(new ModeledDevice(clock), { ...job, slowdowns: [1, 4], clock });
  await clock.run(startWorkers(workers));
  const own: Float32Array[][] = [];
  const before: Float32Array[] = [];
  const after: Float32Array[] = [];
  // The budget: 8 of the fast worker's steps (5 ms each; the slowed one's take 20).
  const pace = { budgetMs: 8 * STEP_MS, maxSteps: 64 };
  const reports = await clock.run(runSyncs(workers, new MemoryNetwork({ clock }), {
    syncs: 3,
    pace,
    tamper: async (payloads) => {
      before.push(await workers[0].engine.readParams());
      own.push(payloads.map((p) => (p as Extract<Payload, { kind: 'dense' }>).values.slice()));
      return [...payloads];
    },
    onSync: async () => void after.push(await workers[0].engine.readParams()),
  }));
  assert.deepEqual(reports[0].steps, [4, 4], 'the first sync measures with H steps');
  assert.deepEqual(reports[0].stepsMs, [4 * STEP_MS, 4 * 4 * STEP_MS]);
  assert.equal(reports[0].predictedLocalMs, null);
  // Each works while half a step still fits after the one in flight: 8 of 5 ms and 2 of 20 ms.
  for (const r of reports.slice(1)) {
    assert.deepEqual(r.steps, [8, 2], `sync ${r.seq}`);
    assert.deepEqual(r.stepsMs, [40, 40], `sync ${r.seq}`);
    assert.deepEqual(r.predictedLocalMs, [40, 40], `sync ${r.seq}`);
  }
  // LocalSGD's new parameters: base − Σ w_i·Δ_i / W (w_i = samples = steps × batch), to f32 rounding.
  for (const [k, r] of reports.entries()) {
    const [w0, w1] = r.steps;
    const base = before[k].map((p, i) => p + own[k][0][i]); // worker 0's base: its params plus its delta
    let worst = 0;
    for (let i = 0; i < base.length; i++) {
      const expected = base[i] - (w0 * own[k][0][i] + w1 * own[k][1][i]) / (w0 + w1);
      worst = Math.max(worst, Math.abs(after[k][i] - expected));
    }
    assert.ok(worst < 1e-5, `sync ${r.seq}: parameters differ from the sample-weighted mean by ${worst}`);
  }
});

test('scalePayload returns a scaled copy and keeps the original (a re-run resends it)', () => {
  const p: Payload = { kind: 'sparse', indices: Uint32Array.from([1, 5]), values: Float32Array.from([2, -4]), length: 8, dtype: 'f16' };
  const q = scalePayload(p, 0.5) as typeof p;
  assert.deepEqual([...q.values], [1, -2]);
  assert.deepEqual([...p.values], [2, -4]);
  assert.equal(scalePayload(p, 1), p);
});

test('scalePayload scales a quantized payload by its block scales: it decodes to the scaled values, codes unchanged', () => {
  const values = Float32Array.from({ length: 100 }, (_, i) => Math.sin(i) * (i < 64 ? 1 : 40));
  const p: Payload = { kind: 'quantized', bytes: encodeQuantized(values, 'int8'), length: 100, format: 'int8', dtype: 'f32' };
  const q = scalePayload(p, 0.25);
  const before = payloadToDense(p, 100);
  const after = payloadToDense(q, 100);
  before.forEach((v, i) => assert.ok(Math.abs(after[i] - v * 0.25) <= Math.abs(v) * 1e-6, `${i}: ${after[i]} vs ${v * 0.25}`));
  assert.deepEqual([...(q as typeof p).bytes.subarray(8)], [...p.bytes.subarray(8)]);
  assert.throws(() => scalePayload(p, -1), /factor ≥ 0/);
});

test('paced rounds refuse robust group averaging (members are not weighed there yet)', async () => {
  const workers = mlpWorkers(new CpuBackend(), job);
  await startWorkers(workers);
  await assert.rejects(runSyncs(workers, new MemoryNetwork(), { syncs: 1, pace: { budgetMs: 10 }, group: { rule: 'centered-clip' } }), /robust group rules do not weigh members/);
});

test('a slowed engine sleeps (f − 1) × its typical compute after its local work, and says how long', async () => {
  const clock = new FakeClock();
  const [plain] = mlpWorkers(new ModeledDevice(clock), { ...job, workers: 1, clock });
  assert.equal((await clock.run(plain.engine.trainSteps(2))).sleptMs, undefined);
  const [slowed] = mlpWorkers(new ModeledDevice(clock), { ...job, workers: 1, slowdowns: [3], clock });
  const t0 = clock.now();
  const work = await clock.run(slowed.engine.trainSteps(4));
  assert.equal(work.sleptMs, 2 * 4 * STEP_MS);
  assert.equal(clock.now() - t0, 3 * 4 * STEP_MS);
});

for (const slowdown of [1, 2]) {
  test(`a time budget ends local work when a typical step would overrun it (slowdown ${slowdown}): at least one step, at most the steps given`, async () => {
    const clock = new FakeClock();
    const [w] = mlpWorkers(new ModeledDevice(clock), { ...job, workers: 1, slowdowns: [slowdown], clock });
    await clock.run(w.engine.trainSteps(8)); // its typical pace
    const stepMs = slowdown * STEP_MS;
    const t1 = clock.now();
    const budgeted = await clock.run(w.engine.trainSteps(100, 6 * stepMs));
    // Six steps fit; a seventh would end past the budget by more than half a step.
    assert.equal(budgeted.steps, 6);
    assert.equal(clock.now() - t1, 6 * stepMs);
    assert.equal(budgeted.samples, budgeted.steps * job.batchSize);
    assert.equal((await clock.run(w.engine.trainSteps(4, 1_000 * stepMs))).steps, 4, 'the steps given are a ceiling');
    assert.equal((await clock.run(w.engine.trainSteps(4, 0.01))).steps, 1, 'one step however short the budget');
  });
}
