import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jobSpecSchema } from '@tabfleet/protocol';
import { EXCHANGE_BUDGET_FACTOR, MAX_STEPS_FACTOR, nextPace, roundBudgetMs, stepsFor, SyncTimeModel } from './pacing';

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

test('pacing is refused where it cannot vary the steps', () => {
  assert.throws(() => spec({ strategy: 'ddp', H: 1 }), /ddp takes one step per sync/);
  assert.equal(spec({ trust: 'untrusted' }).pacing, 'paced', 'untrusted jobs weigh members in their robust rules');
  assert.throws(() => spec({ pacing: 'fixed', roundBudgetMs: 500 }), /only a paced job has a round budget/);
});
