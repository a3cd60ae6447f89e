import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jobSpecSchema, ProtocolError } from '@tabfleet/protocol';
import { DEFAULT_MAX_MODEL_BYTES } from '../checkpoint-uploads';
import { checkModelSize, requestedRange } from './checkpoint-transfer';

const gpt = (shape: object, tokenizer = 'gpt2') => jobSpecSchema.parse({
  preset: 'gpt', gpt: shape, dataset: 'fortunes', tokenizer, strategy: 'diloco', H: 4, hyperparameters: { lr: 1e-3, batchSize: 8 }, targetSteps: 100,
});

test('a job\'s model is bounded by the server\'s limit: GPT-2 small fits the default 2 GiB; a model over it is refused with its size', () => {
  assert.doesNotThrow(() => checkModelSize(gpt({ layers: 12, heads: 12, width: 768, context: 1024 }), DEFAULT_MAX_MODEL_BYTES));
  const big = gpt({ layers: 48, heads: 16, width: 1024, context: 64 }, 'bytes');
  assert.throws(() => checkModelSize(big, DEFAULT_MAX_MODEL_BYTES), (e: ProtocolError) => e.code === 'bad_request'
    && /this model has 604,\d{3},\d{3} parameters \(2\d{3}\.\d MiB of f32\); this server takes models of at most 2048\.0 MiB/.test(e.message));
  // At the old 32 MiB ceiling GPT-2 small is refused, and the message says by how much.
  assert.throws(() => checkModelSize(gpt({ layers: 12, heads: 12, width: 768, context: 1024 }), 32 * 2 ** 20), /124,439,808 parameters \(474\.\d MiB of f32\)/);
});

test('Range headers: a start with or without an end, a suffix; past the end or malformed is unsatisfiable', () => {
  assert.equal(requestedRange(undefined, 100), null);
  assert.deepEqual(requestedRange('bytes=10-', 100), { start: 10, end: 99 });
  assert.deepEqual(requestedRange('bytes=10-19', 100), { start: 10, end: 19 });
  assert.deepEqual(requestedRange('bytes=90-500', 100), { start: 90, end: 99 });
  assert.deepEqual(requestedRange('bytes=-30', 100), { start: 70, end: 99 });
  for (const bad of ['bytes=100-', 'bytes=20-10', 'bytes=-', 'bytes=-0', 'bytes=0-1,5-6', 'items=0-1']) assert.equal(requestedRange(bad, 100), 'unsatisfiable', bad);
});
