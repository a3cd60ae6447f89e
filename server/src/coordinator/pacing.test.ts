import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DDP_MICRO_BATCHES, jobSpecSchema } from '@tabfleet/protocol';
import { EXCHANGE_BUDGET_FACTOR, MAX_STEPS_FACTOR, nextPace, roundBudgetMs, samplesPerStep, stepsFor, SyncTimeModel } from './pacing';

const spec = (o: object = {}) => jobSpecSchema.parse({ preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 8, trust: 'trusted', pacing: 'paced', hyperparameters: { lr: 0.1, batchSize: 32 }, targetSteps: 100, ...o });

test('paced steps: H steps of the fastest member fill the budget; slower members do proportionally fewer, at least one', () => {
  const s = spec();
  const budget = roundBudgetMs(s, [10, 20, 80, null]);
  assert.equal(budget, 80);
  assert.deepEqual([10, 20, 80, 1000].map((p) => stepsFor(s, p, budget)), [8, 4, 1, 1]);
  assert.equal(stepsFor(s, null, budget), 8, 'an unmeasured member does H');
  assert.equal(roundBudgetMs(s, [null]), null);
  // A researcher's budget: a fast member does more than H, up to MAX_STEPS_FACTOR × H.
  const long = spec({ roundBudgetMs: 10_000 });
  assert.equal(stepsFor(long, 10, roundBudgetMs(long, [10])), MAX_STEPS_FACTOR * 8);
  assert.equal(stepsFor(spec({ pacing: 'fixed' }), 10, 80), 8, 'fixed pacing: always H');
  // A slow exchange lengthens the default budget, so it stays a tenth of the sync.
  assert.equal(roundBudgetMs(s, [10, 20], 50), EXCHANGE_BUDGET_FACTOR * 50);
  assert.equal(roundBudgetMs(s, [10, 20], 5), 80);
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

test('the sync-time model predicts the slowest member\'s work plus the exchange, and scores itself', () => {
  const m = new SyncTimeModel();
  m.committed(1_000, [{ steps: 8, msPerStep: 10 }, { steps: 2, msPerStep: 50 }], 20);
  assert.equal(m.next, 120, 'max(80, 100) + 20');
  assert.equal(m.last, null);
  m.committed(1_150, [{ steps: 8, msPerStep: 10 }], 20);
  assert.deepEqual(m.last, { predictedMs: 120, actualMs: 150 });
  assert.equal(m.medianError, 0.2);
  m.reset();
  m.committed(2_000, [{ steps: 8, msPerStep: null }], 20);
  assert.equal(m.next, null, 'an unmeasured member: no prediction');
});

test('a member\'s pace follows its newest measurements', () => {
  assert.equal(nextPace(null, 400, 8), 50);
  assert.equal(nextPace(50, 800, 8), 75);
});

test('a round budget is refused where pacing does not use one', () => {
  assert.equal(spec({ trust: 'untrusted' }).pacing, 'paced', 'untrusted jobs weigh members in their robust rules');
  assert.throws(() => spec({ pacing: 'fixed', roundBudgetMs: 500 }), /only a paced job has a round budget/);
});
