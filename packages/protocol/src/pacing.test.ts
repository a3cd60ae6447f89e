import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jobSpecSchema } from './jobs';
import { anotherStepFits, cutSteps, nextPace, pacedStepCeiling, stepsWithinBudget } from './pacing';

test('a paced member\'s step ceiling: twice the steps given in a trusted job, the steps given in an untrusted one', () => {
  assert.equal(pacedStepCeiling(10, 'trusted'), 20);
  assert.equal(pacedStepCeiling(10, 'untrusted'), 10);
  assert.equal(pacedStepCeiling(10, jobSpecSchema.parse({ preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 4,
    hyperparameters: { lr: 0.1, batchSize: 64 }, maxWorkers: 4, targetSteps: 100 }).trust), 10, 'the default: untrusted');
});

test('a paced member\'s pace: a weighted mean of what it measured, but a measurement at half the estimate or less (a warm-up forgotten) replaces it', () => {
  assert.equal(nextPace(null, 1_100, 1), 1_100);
  // The first step's shader compiles: 1,100 ms, then 21 ms a step. A mean would give 560 ms, 26 steps of it in a budget of 28.
  assert.equal(nextPace(1_100, 420, 20), 21);
  assert.equal(nextPace(40, 1_000, 20), 45, 'slower: the mean');
  assert.equal(nextPace(40, 440, 20), 31, 'faster by less than half: the mean');
});

test('a paced job\'s last sync: the planned steps scaled to the mean left, each member at least one', () => {
  // 8 members at speeds 1, 1, 1, 2, 2, 4, 4, 8, 30 steps for the fastest: mean 17.4; 7 left.
  const planned = [30, 30, 30, 15, 15, 8, 7, 4];
  const cut = cutSteps(planned, 7);
  assert.deepEqual(cut, [12, 12, 12, 6, 6, 3, 3, 2]);
  assert.ok(Math.abs(cut.reduce((a, b) => a + b, 0) / cut.length - 7) < 0.5, 'the sync ends on the target');
  assert.deepEqual(cutSteps(planned, 20), planned, 'a mean under what is left: unchanged');
  assert.deepEqual(cutSteps([20, 10, 2], 4), [7, 4, 1], 'shares kept as far as whole steps allow');
  // [2, 1] kept the shares of [10, 1] but its mean rounds to 2: one past the step left.
  assert.deepEqual(cutSteps([10, 1], 1), [1, 1], 'the target before the shares');
  assert.deepEqual(cutSteps([40, 2], 0), [1, 1], 'at least one step');
});

test('a paced member stops within half a step of its budget: another step while half of one still fits, at least one, at most the ceiling', () => {
  assert.equal(anotherStepFits(900, 200, 1_000), true, '900 + 100 fits 1,000');
  assert.equal(anotherStepFits(901, 200, 1_000), false);
  assert.equal(stepsWithinBudget(100, 1_000, 100), 10, 'ten 100 ms steps in 1 s');
  assert.equal(stepsWithinBudget(120, 1_000, 100), 8, '8 steps end at 960 ms, a 9th would end at 1,080: more than half over');
  assert.equal(stepsWithinBudget(5_000, 1_000, 100), 1, 'always one step');
  assert.equal(stepsWithinBudget(10, 1_000, 16), 16, 'never past the ceiling');
});

test('a cut sync never passes the target: the mean of the cut steps rounds to the steps left, for every plan of two or three members', () => {
  const plans: number[][] = [];
  for (let a = 1; a <= 12; a++) for (let b = 1; b <= 12; b++) {
    plans.push([a, b]);
    for (let c = 1; c <= 12; c += 3) plans.push([a, b, c]);
  }
  for (let left = 1; left <= 6; left++) {
    for (const planned of plans) {
      const cut = cutSteps(planned, left);
      const mean = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;
      assert.ok(cut.every((n) => n >= 1), `${planned} → ${cut}: a step each`);
      if (mean(planned) > left) assert.equal(Math.round(mean(cut)), left, `${planned} with ${left} left → ${cut}`);
      else assert.deepEqual(cut, planned);
    }
  }
});
