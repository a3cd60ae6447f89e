import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DDP_MICRO_BATCHES, jobSpecSchema, PACED_STEP_CEILING } from '@tabfleet/protocol';
import { AutoSync, EXCHANGE_BUDGET_FACTOR, FIRST_WORK_MS, MAX_STEPS_FACTOR, measuredPace, nextPace, roundBudgetMs, samplesPerStep, stepsFor, SyncTimeModel, unmeasuredWork } from './pacing';

const spec = (o: object = {}) => jobSpecSchema.parse({ preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 8, trust: 'trusted', pacing: 'paced',
  hyperparameters: { lr: 0.1, batchSize: 32 }, targetSteps: 100, ...o });

test('paced steps: H steps of the fastest member fill the budget; slower members do proportionally fewer, at least one', () => {
  const s = spec();
  assert.equal(roundBudgetMs(s, [10, 20, 40, null]), 80);
  assert.deepEqual([10, 20, 40, 1000].map((p) => stepsFor(s, p, 80)), [8, 4, 2, 1]);
  assert.equal(stepsFor(s, null, 80), 1, 'an unmeasured member does an eighth of H, at least one');
  assert.equal(stepsFor(spec({ H: 512 }), null, 80), 64);
  assert.equal(stepsFor(spec({ pacing: 'fixed' }), null, null), 8, 'a fixed job\'s does H');
  assert.equal(roundBudgetMs(s, [null]), null);
});

test('an unmeasured member\'s first work is time-boxed, its ceiling the cap, unless that could pass the target', () => {
  const s = spec();
  // Half the cap given, so that its ceiling (twice what is given) is MAX_STEPS_FACTOR × H.
  assert.deepEqual(unmeasuredWork(s, 1000), { steps: (MAX_STEPS_FACTOR * 8) / PACED_STEP_CEILING, budgetMs: FIRST_WORK_MS });
  assert.deepEqual(unmeasuredWork(spec({ roundBudgetMs: 3000 }), 1000), { steps: 32, budgetMs: 3000 }, 'the job\'s own budget');
  assert.deepEqual(unmeasuredWork(spec({ pacing: 'auto' }), 1000), { steps: 32, budgetMs: FIRST_WORK_MS });
  // Near the target: an eighth of H, no box, so the sync can be cut to the target as any other.
  assert.deepEqual(unmeasuredWork(s, MAX_STEPS_FACTOR * 8), { steps: 1 });
  assert.deepEqual(unmeasuredWork(s, MAX_STEPS_FACTOR * 8 + 1), { steps: 32, budgetMs: FIRST_WORK_MS });
  // A joiner while the others' budgets run: until a box before the latest ends, at least a box.
  assert.deepEqual(unmeasuredWork(s, 1000, 6_000), { steps: 32, budgetMs: 6_000 - FIRST_WORK_MS });
  assert.deepEqual(unmeasuredWork(spec({ roundBudgetMs: 10_000 }), 1000, 1_500), { steps: 32, budgetMs: FIRST_WORK_MS });
  assert.deepEqual(unmeasuredWork(s, 1000, -200), { steps: 32, budgetMs: FIRST_WORK_MS });
  assert.deepEqual(unmeasuredWork(s, MAX_STEPS_FACTOR * 8, 6_000), { steps: 1 }, 'near the target as before');
  assert.deepEqual(unmeasuredWork(spec({ pacing: 'fixed' }), 1000), { steps: 8 }, 'a fixed job: H');
  assert.deepEqual(unmeasuredWork(spec({ strategy: 'ddp', H: 1 }), 1000), { steps: DDP_MICRO_BATCHES }, 'paced ddp: its micro-batches');
  // Untrusted: its ceiling is the steps given, so it is given the whole cap.
  const untrusted = spec({ trust: 'untrusted' });
  assert.deepEqual(unmeasuredWork(untrusted, 1000), { steps: MAX_STEPS_FACTOR * 8, budgetMs: FIRST_WORK_MS });
  assert.deepEqual(unmeasuredWork(untrusted, MAX_STEPS_FACTOR * 8), { steps: 1 }, 'its ceiling could reach the target: an eighth of H, no box');
  assert.deepEqual(unmeasuredWork(untrusted, MAX_STEPS_FACTOR * 8 + 1), { steps: MAX_STEPS_FACTOR * 8, budgetMs: FIRST_WORK_MS });
});

test('a paced member\'s pace: in an untrusted job the server\'s time for the steps it counted, never the member\'s computeMs', () => {
  const untrusted = spec({ trust: 'untrusted' });
  // 20 steps, handed out 1,000 ms before the member was ready; it claims 1 ms of compute.
  assert.equal(measuredPace(untrusted, null, { steps: 20, workMs: 1_000, computeMs: 1 }), 50);
  assert.equal(measuredPace(untrusted, 50, { steps: 20, workMs: 1_400, computeMs: 1 }), 60, 'the mean with its estimate, as nextPace');
  // Faster only by being ready sooner: half the time for the same steps replaces the estimate.
  assert.equal(measuredPace(untrusted, 50, { steps: 20, workMs: 500, computeMs: 1 }), 25);
  assert.equal(measuredPace(untrusted, null, { steps: 20, workMs: 0, computeMs: 0 }), 1 / 20, 'at least a millisecond of work: never a pace of 0');
  // A trusted job's members are the researcher's own: their compute time, without the trip to the server.
  assert.equal(measuredPace(spec(), null, { steps: 20, workMs: 1_000, computeMs: 800 }), 40);
});

test('the default budget: H steps of the fastest, a twentieth of overhead, the cap', () => {
  const s = spec();
  // A researcher's budget: a fast member does more than H, up to MAX_STEPS_FACTOR × H.
  const long = spec({ roundBudgetMs: 10_000 });
  assert.equal(stepsFor(long, 10, roundBudgetMs(long, [10])), MAX_STEPS_FACTOR * 8);
  assert.equal(stepsFor(spec({ pacing: 'fixed' }), 10, 80), 8, 'fixed pacing: always H');
  // A slow exchange lengthens the default budget, so it stays a twentieth of the sync.
  assert.equal(roundBudgetMs(s, [10, 20], 30), 29 * 20, `${EXCHANGE_BUDGET_FACTOR} × 30 ms, snapped to whole steps of the 20-ms member`);
  // ... but no longer than the fastest member's most steps take: past that it would only wait.
  assert.equal(roundBudgetMs(s, [10, 20], 50), MAX_STEPS_FACTOR * 8 * 10);
  assert.equal(roundBudgetMs(s, [10, 20], 3), 80);
});

test('the default budget holds whole steps of the slowest member that fits twice it (two where they fit), so nobody waits on a half step', () => {
  const s = spec();
  // H = 8 steps of 10 ms is 80 ms, one step of the 80-ms member: snapped to two of its steps.
  assert.equal(roundBudgetMs(s, [10, 20, 80]), 2 * 80);
  assert.deepEqual([10, 20, 80].map((p) => stepsFor(s, p, 160)), [16, 8, 2]);
  // 60 ms: 80 is 1.33 of its steps, rounded to 2 (120 ms); 30 ms: 2.67, rounded to 3 (90 ms).
  assert.equal(roundBudgetMs(s, [10, 60]), 120);
  assert.equal(roundBudgetMs(s, [10, 30]), 90);
  // A member just slower than the base: one of its steps is the budget, so it ends on it too.
  assert.equal(roundBudgetMs(s, [10, 100]), 100);
  // A member whose one step does not fit twice the base does one step and does not stretch the budget.
  assert.equal(roundBudgetMs(s, [10, 20, 1000]), 80);
  assert.equal(roundBudgetMs(s, [10, 20, 40, 1000]), 80);
  // Equal members: H steps each, as before; an H = 1 job is not stretched to two.
  assert.equal(roundBudgetMs(s, [10, 10, 10]), 80);
  assert.equal(roundBudgetMs(spec({ H: 1 }), [10, 15]), 15);
  // Aiming at the fastest member's most steps (640 ms): two steps of a 321-ms member pass it by 2 ms,
  // which the fast members wait; one step would halve their sync (seen in CI: 15 of 32 steps). Two
  // steps of a 480-ms member would leave them idle a third of the sync: one step.
  const longest = MAX_STEPS_FACTOR * 8 * 10;
  assert.equal(roundBudgetMs(s, [10, 321], longest / EXCHANGE_BUDGET_FACTOR), 2 * 321);
  assert.equal(roundBudgetMs(s, [10, 480], longest / EXCHANGE_BUDGET_FACTOR), 480);
  // A Moshpit job keeps the base: its groups wait for their own slowest, not the job's.
  assert.equal(roundBudgetMs(spec({ groupSize: 4, maxWorkers: 16 }), [10, 20, 80]), 80);
});

test('paced ddp: members split the global batch in micro-batches by their speed, and a fixed ddp job is untouched', () => {
  const s = spec({ strategy: 'ddp', H: 1 });
  assert.equal(samplesPerStep(s), 32 / DDP_MICRO_BATCHES);
  assert.equal(roundBudgetMs(s, [10, 10, null]), null, 'all do the nominal micro-batches until every pace is known');
  assert.equal(stepsFor(s, 10, null), DDP_MICRO_BATCHES);
  // Paces 10, 10, 40 ms per micro-batch: 12 micro-batches in the time T with T/10 + T/10 + T/40 = 12.
  const budget = roundBudgetMs(s, [10, 10, 40])!;
  const steps = [10, 10, 40].map((p) => stepsFor(s, p, budget));
  assert.deepEqual(steps, [5, 5, 1]);
  assert.ok(Math.abs(steps.reduce((a, b) => a + b, 0) - 3 * DDP_MICRO_BATCHES) <= 1, 'the global batch stays members × batchSize');
  const fixed = spec({ strategy: 'ddp', H: 1, pacing: 'fixed' });
  assert.equal(stepsFor(fixed, 10, 100), 1);
  assert.equal(samplesPerStep(fixed), 32);
  // What a paced ddp spec must be.
  const bad = jobSpecSchema.safeParse({ ...s, hyperparameters: { lr: 0.1, batchSize: 30 } });
  assert.ok(!bad.success && /multiple of 4/.test(bad.error.message), 'the batch splits into whole micro-batches');
  const budgeted = jobSpecSchema.safeParse({ ...s, roundBudgetMs: 500 });
  assert.ok(!budgeted.success && /no budget to set/.test(budgeted.error.message));
});

test('the sync-time model predicts the slowest member\'s work plus the exchange, scores itself, and keeps what syncs cost beyond their work', () => {
  const m = new SyncTimeModel();
  m.committed(1_000, [{ steps: 8, msPerStep: 10 }, { steps: 2, msPerStep: 50 }], 20);
  assert.equal(m.next, 120, 'max(80, 100) + 20');
  assert.equal(m.last, null);
  m.committed(1_150, [{ steps: 8, msPerStep: 10 }], 20);
  assert.deepEqual(m.last, { predictedMs: 120, actualMs: 150 });
  assert.equal(m.medianError, 0.2);
  // What the sync took beyond its planned work (100 ms): the exchange, applying, the slowest member's overrun.
  assert.equal(m.medianOverheadMs, 50);
  m.committed(1_250, [{ steps: 8, msPerStep: 10 }], 20);
  m.committed(1_340, [{ steps: 8, msPerStep: 10 }], 20);
  assert.equal(m.medianOverheadMs, 20, 'median of 50, 20, 10 (planned work 100, 80, 80 ms)');
  m.reset();
  m.committed(2_000, [{ steps: 8, msPerStep: null }], 20);
  assert.equal(m.next, null, 'an unmeasured member: no prediction');
});

test('a member\'s pace follows its newest measurements', () => {
  assert.equal(nextPace(null, 400, 8), 50);
  assert.equal(nextPace(50, 800, 8), 75);
});

test('auto: the smallest H whose exchange is at most a tenth of the sync, fp16 when it allows a smaller H, fp32 on a tie', () => {
  const s = spec({ pacing: 'auto' });
  const auto = new AutoSync(s, ['f32', 'f16']);
  assert.deepEqual(auto.choose(10), { H: 8, dtype: 'f32' }, 'nothing measured: the job\'s H');
  // Exchange 50 ms at fp32, steps of 10 ms: H ≥ 9 × 50 / 10 = 45 → 64; fp16 is predicted at 25 ms:
  // H ≥ 22.5 → 32, the smaller: fp16.
  auto.measured('f32', 50);
  assert.deepEqual(auto.choose(10), { H: 32, dtype: 'f16' });
  // Slower still (fp32 200 ms, fp16 100 ms: H ≥ 90, past the largest candidate, MAX_STEPS_FACTOR × H
  // = 64): nothing fits; the largest H at the faster precision.
  const slow = new AutoSync(s, ['f32', 'f16']);
  slow.measured('f32', 200);
  assert.deepEqual(slow.choose(10), { H: MAX_STEPS_FACTOR * 8, dtype: 'f16' });
  // Exchange 20 ms: fp32 needs H ≥ 18 → 32; fp16 (10 ms) H ≥ 9 → 16: fp16 wins.
  const mid = new AutoSync(s, ['f32', 'f16']);
  mid.measured('f32', 20);
  assert.deepEqual(mid.choose(10), { H: 16, dtype: 'f16' });
  // Measured at fp16 it took as long as fp32 (latency-bound; EWMA of 20 and 20): the measurement wins.
  mid.measured('f16', 20);
  assert.deepEqual(mid.choose(10), { H: 32, dtype: 'f32' });
  // Fast links: H 1 suffices.
  const fast = new AutoSync(s, ['f32', 'f16']);
  fast.measured('f32', 1);
  assert.deepEqual(fast.choose(100), { H: 1, dtype: 'f32' });
  // Only fp32 allowed (untrusted or compressed jobs).
  const f32 = new AutoSync(s, ['f32']);
  f32.measured('f32', 20);
  assert.equal(f32.choose(10).dtype, 'f32');
  assert.throws(() => spec({ pacing: 'auto', roundBudgetMs: 500 }), /chosen by the server/);
});

test('a round budget is refused where pacing does not use one', () => {
  assert.equal(spec({ trust: 'untrusted' }).pacing, 'paced', 'untrusted jobs weigh members in their robust rules');
  assert.throws(() => spec({ pacing: 'fixed', roundBudgetMs: 500 }), /only a paced job has a round budget/);
});
