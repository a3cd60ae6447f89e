// A job spec names what it changes: everything but the model may be left out, and parsing fills in
// every default, while what is given is still checked strictly, each refusal with its path.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_GPT, DEFAULT_TARGET_STEPS, jobSpecSchema, targetStepsOf } from './jobs';

const refusals = (input: unknown) => {
  const r = jobSpecSchema.safeParse(input);
  assert.equal(r.success, false, JSON.stringify(input));
  return r.error!.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
};

test('a spec that names only its model gets every section filled in', () => {
  const s = jobSpecSchema.parse({ preset: 'mlp-fashion' });
  assert.deepEqual(s, {
    preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 1, compression: 'none', recompute: 'auto',
    hyperparameters: { optimizer: 'sgd', lr: 0.05, batchSize: 32, momentum: 0.9, weightDecay: 0, outerLr: 0.7, outerMomentum: 0.9 },
    minWorkers: 1, maxWorkers: 8, hierarchical: false, homeRings: true, regionalGroups: false, trust: 'untrusted', trimFraction: 0.1, seed: 1,
    checkpointEvery: 10, evalEverySteps: 100, targetEpochs: 1, targetSteps: undefined, gpt: undefined, tokenizer: undefined,
    pacing: 'auto', sparsity: 0.95, aggregation: 'centered-clip', fragments: 1, overlapSteps: 0, fragmentMixing: 0,
  });
  // One epoch of one of 8 shards: 60,000 / 8 = 7,500 examples, at batch 32.
  assert.equal(targetStepsOf(s), Math.ceil(7_500 / 32));
  // What was filled in is itself a spec that parses to the same job.
  assert.deepEqual(jobSpecSchema.parse(s), s);
});

test('defaults follow what was given: the model, the strategy, the optimizer, the dataset', () => {
  const gpt = jobSpecSchema.parse({ preset: 'gpt' });
  assert.deepEqual([gpt.dataset, gpt.tokenizer, gpt.gpt], ['text-corpus', 'chars', DEFAULT_GPT]);
  assert.equal(gpt.hyperparameters.batchSize, 8);
  const diloco = jobSpecSchema.parse({ preset: 'gpt', strategy: 'diloco' });
  assert.deepEqual([diloco.hyperparameters.optimizer, diloco.hyperparameters.lr], ['adamw', 3e-3]);
  assert.equal(jobSpecSchema.parse({ preset: 'mlp-fashion', strategy: 'diloco' }).hyperparameters.lr, 1e-3);
  assert.equal(jobSpecSchema.parse({ preset: 'mlp-fashion', hyperparameters: { optimizer: 'lamb' } }).hyperparameters.lr, 0.02);
  // Only the named field changes: the rest of the section keeps its defaults.
  const lr = jobSpecSchema.parse({ preset: 'mlp-fashion', hyperparameters: { lr: 0.2 } }).hyperparameters;
  assert.deepEqual([lr.lr, lr.batchSize, lr.momentum], [0.2, 32, 0.9]);
  assert.equal(jobSpecSchema.parse({ preset: 'transformer-char' }).dataset, 'text-corpus');
  // A text whose size depends on its tokenization, or an upload, trains for a number of steps.
  const fortunes = jobSpecSchema.parse({ preset: 'gpt', dataset: 'fortunes' });
  assert.deepEqual([fortunes.targetSteps, fortunes.targetEpochs], [DEFAULT_TARGET_STEPS, undefined]);
  const steps = jobSpecSchema.parse({ preset: 'mlp-fashion', targetSteps: 50 });
  assert.deepEqual([steps.targetSteps, steps.targetEpochs], [50, undefined]);
});

test('strict as before: unknown keys, bad values and what cannot run are refused with their paths', () => {
  assert.match(refusals({}), /^preset: /);
  assert.match(refusals({ preset: 'mlp-fashion', colour: 'red' }), /Unrecognized key: "colour"/);
  assert.match(refusals({ preset: 'mlp-fashion', hyperparameters: { lr: -1 } }), /^hyperparameters\.lr: /);
  assert.match(refusals({ preset: 'mlp-fashion', hyperparameters: { learningRate: 0.1 } }), /^hyperparameters: Unrecognized key: "learningRate"/);
  assert.match(refusals({ preset: 'mlp-fashion', hyperparameters: null }), /^hyperparameters: /);
  assert.match(refusals({ preset: 'mlp-fashion', dataset: 'text-corpus' }), /^dataset: mlp-fashion classifies images/);
  assert.match(refusals({ preset: 'mlp-fashion', targetSteps: 10, targetEpochs: 1 }), /^targetSteps: give at most one of targetSteps and targetEpochs/);
  assert.match(refusals({ preset: 'mlp-fashion', strategy: 'ddp', H: 4 }), /^H: ddp averages every step/);
  assert.match(refusals({ preset: 'gpt', gpt: { layers: 2 } }), /^gpt\.heads: /);
});
