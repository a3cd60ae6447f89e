import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jobSpecSchema } from '@tabfleet/protocol';
import { formDefaults } from './job-defaults';

const job = { preset: 'mlp-fashion', dataset: 'fashion-mnist', hyperparameters: { lr: 0.1, batchSize: 32 }, targetSteps: 10 } as const;

test('each default the form shows is what the server fills in for the same choices', () => {
  for (const strategy of ['localsgd', 'diloco', 'ddp'] as const) {
    for (const trust of ['trusted', 'untrusted'] as const) {
      const spec = { ...job, strategy, trust, compression: 'dgc' as const };
      const d = formDefaults(spec);
      const parsed = jobSpecSchema.parse(spec);
      assert.equal(d.sparsity, String(parsed.sparsity));
      assert.equal(d.outerLr, String(parsed.hyperparameters.outerLr));
      assert.equal(d.outerMomentum, String(parsed.hyperparameters.outerMomentum));
      assert.equal(d.momentum, String(parsed.hyperparameters.momentum));
      assert.equal(d.aggregation, parsed.aggregation);
      assert.equal(d.pacing, parsed.pacing);
      assert.equal(d.evalEverySteps, String(parsed.evalEverySteps));
    }
  }
  assert.equal(formDefaults({ strategy: 'diloco' }).optimizer, 'adamw');
  assert.equal(formDefaults({ strategy: 'ddp' }).optimizer, 'sgd');
  // Streaming DiLoCo: fixed pacing, and mixing only with an overlap.
  const streaming = { ...job, strategy: 'diloco', trust: 'trusted', fragments: 2, overlapSteps: 1, H: 4 } as const;
  const parsed = jobSpecSchema.parse(streaming);
  assert.equal(formDefaults(streaming).pacing, parsed.pacing);
  assert.equal(formDefaults(streaming).fragmentMixing, String(parsed.fragmentMixing));
  assert.equal(formDefaults({ ...streaming, overlapSteps: 0 }).pacing, 'fixed');
  assert.equal(formDefaults(job).fragments, '1');
});

test('the tokenizer default follows the dataset, and choices still being typed do not throw', () => {
  assert.equal(formDefaults({ dataset: 'text-corpus' }).tokenizer, 'chars');
  assert.equal(formDefaults({ dataset: 'fortunes' }).tokenizer, 'bytes');
  assert.equal(formDefaults({ dataset: 'fashion-mnist' }).tokenizer, 'none (not text)');
  // A ddp batch that does not split into micro-batches is paced `fixed`.
  assert.equal(formDefaults({ strategy: 'ddp', hyperparameters: { batchSize: 30 } }).pacing, 'fixed');
  assert.equal(formDefaults({ strategy: 'nonsense', hyperparameters: { batchSize: 'x' } }).sparsity, '0.95');
  assert.equal(formDefaults({ trust: 'trusted' }).sparsity, '0.99');
});
