import assert from 'node:assert/strict';
import { test } from 'node:test';
import { estimateJobMemory, jobSpecSchema } from '@tabfleet/protocol';
import { formatBytes } from '../shared/format';
import { memoryLine } from './model-memory';

const gpt2 = { preset: 'gpt', gpt: { layers: 12, heads: 12, width: 768, context: 1024 }, dataset: 'fortunes', tokenizer: 'gpt2', strategy: 'diloco' } as const;

test('GPT-2 small: parameters, gradients, AdamW state, activations with and without recompute, the batch', () => {
  const parsed = jobSpecSchema.safeParse(gpt2);
  const e = estimateJobMemory(jobSpecSchema.parse(gpt2));
  const text = memoryLine(parsed);
  // 124,439,808 floats in 480 MiB (503.3 MB) buffers: the parameters, the gradient buffer, each of AdamW's
  // two moments; 776 MiB an example with recompute (what the estimator says; bench/results/memory.json records the measured figure).
  assert.match(text, /^A tab's GPU memory \(WebGPU buffers, in the runtime's pool sizes\): 503\.3 MB of parameters, /);
  assert.equal(e.gradients, e.parameters);
  assert.ok(text.includes('503.3 MB of gradients, 1.01 GB of AdamW state; '), text);
  assert.ok(text.includes('activations 813.7 MB an example with recompute, '), text);
  assert.ok(text.includes(`, ${formatBytes(e.perExample.plain)} without; `), text);
  assert.ok(text.includes(`the batch of 8 in one pass: ${formatBytes(e.batch.recompute!)} with recompute, ${formatBytes(e.batch.plain)} without; a tab with less memory splits it`), text);
  const off = memoryLine(jobSpecSchema.safeParse({ ...gpt2, recompute: 'off' }));
  assert.match(off, /in one pass: [\d.]+ GB without recompute \(the job's setting\); a tab with less memory splits it into micro-batches\.$/);
});

test('a model that does not recompute says so; its optimizer\'s state by name', () => {
  const text = memoryLine(jobSpecSchema.safeParse({ preset: 'cnn-fashion' }));
  assert.match(text, /of SGD velocity; activations [\d.]+ kB an example \(this model does not recompute them\); the batch of 32 in one pass: [\d.]+ MB; a tab/);
  assert.match(memoryLine(jobSpecSchema.safeParse({ preset: 'mlp-fashion', hyperparameters: { optimizer: 'lamb', batchSize: 1 } })), /of LAMB state; .* the batch of 1 in one pass: [\d.]+ MB\.$/);
});

test('an invalid job: no estimate, and why', () => {
  // The model's own issues are the size line's to say.
  assert.equal(memoryLine(jobSpecSchema.safeParse({ ...gpt2, gpt: { ...gpt2.gpt, heads: 5 } })), '');
  assert.equal(memoryLine(jobSpecSchema.safeParse({ ...gpt2, hyperparameters: { batchSize: 0 } })),
    'memory: not estimated while hyperparameters.batchSize is invalid (Too small: expected number to be >=1)');
});
