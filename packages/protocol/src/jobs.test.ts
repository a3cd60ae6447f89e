import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jobSpecSchema, targetStepsOf, type JobSpecInput } from './jobs';

const base: JobSpecInput = { preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 4, hyperparameters: { lr: 0.1, batchSize: 64 }, maxWorkers: 4, targetSteps: 100 };

test('a job spec gets its defaults filled in', () => {
  const s = jobSpecSchema.parse(base);
  assert.equal(s.compression, 'none');
  assert.equal(s.minWorkers, 1);
  assert.equal(s.hyperparameters.outerLr, 0.7);
  assert.equal(s.hyperparameters.outerMomentum, 0.9);
  // Untrusted unless said otherwise, and then combined by centered clip.
  assert.equal(s.trust, 'untrusted');
  assert.equal(s.aggregation, 'centered-clip');
  assert.equal(jobSpecSchema.parse({ ...base, trust: 'trusted' }).aggregation, 'mean');
  assert.equal(jobSpecSchema.parse({ ...base, trust: 'trusted', aggregation: 'median' }).aggregation, 'median');
  assert.equal(jobSpecSchema.safeParse({ ...base, maxWorkers: 17 }).success, false);
  assert.equal(s.sparsity, 0.99);
  // DDP sends its gradients sparser; DiLoCo with DGC deltas takes a gentler outer step.
  assert.equal(jobSpecSchema.parse({ ...base, strategy: 'ddp', H: 1, compression: 'dgc' }).sparsity, 0.999);
  const d = jobSpecSchema.parse({ ...base, strategy: 'diloco', compression: 'dgc' });
  assert.deepEqual([d.sparsity, d.hyperparameters.outerLr, d.hyperparameters.outerMomentum], [0.99, 1, 0.5]);
  const given = jobSpecSchema.parse({ ...base, strategy: 'diloco', compression: 'dgc', sparsity: 0.9, hyperparameters: { lr: 0.1, batchSize: 64, outerLr: 0.3, outerMomentum: 0 } });
  assert.deepEqual([given.sparsity, given.hyperparameters.outerLr, given.hyperparameters.outerMomentum], [0.9, 0.3, 0]);
});

test('target epochs convert to steps over one shard of the dataset', () => {
  const s = jobSpecSchema.parse({ ...base, targetSteps: undefined, targetEpochs: 2 });
  // 60000 / 4 workers = 15000 examples per shard; 2 epochs at batch 64 = ceil(30000 / 64).
  assert.equal(targetStepsOf(s), 469);
  assert.equal(targetStepsOf(jobSpecSchema.parse(base)), 100);
});

test('job specs that cannot run are refused', () => {
  for (const bad of [
    { ...base, strategy: 'ddp' },
    { ...base, targetEpochs: 1 },
    { ...base, minWorkers: 9 },
    { ...base, hyperparameters: { lr: Number.NaN, batchSize: 64 } },
    { ...base, unknownField: 1 },
  ]) assert.equal(jobSpecSchema.safeParse(bad).success, false, JSON.stringify(bad));
});
