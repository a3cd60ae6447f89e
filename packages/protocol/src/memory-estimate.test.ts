// The memory estimate on models small enough to count by hand (in plain f32 bytes, then as the WebGPU
// runtime's pool rounds them), a job spec's defaults, and refusals. packages/nn's
// memory-estimate.test.ts checks it against peaks the WebGPU runtime measures.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jobSpecSchema } from './jobs';
import { architectureLayout } from './layout';
import { estimateJobMemory, estimateMemory, pooledBytes } from './memory-estimate';

test('an MLP 8 → 4 → 2 counted by hand, in f32 bytes', () => {
  // Layout: layers.0.weight [4, 8] at 0, its bias [4] at 64, layers.1.weight [2, 4] at 128, its bias [2]
  // at 192: 194 floats with the 64-float alignment.
  assert.equal(architectureLayout({ kind: 'mlp', sizes: [8, 4, 2] }).length, 194);
  const e = estimateMemory({ kind: 'mlp', sizes: [8, 4, 2] }, { optimizer: 'adamw', batchSize: 3, rounding: 'f32' });
  assert.equal(e.parameters, 194 * 4);
  assert.equal(e.optimizerState, 2 * 194 * 4);
  // The flat buffer, and one tensor per parameter: 32 + 4 + 8 + 2 floats.
  assert.equal(e.gradients, 194 * 4 + 46 * 4);
  // Floats a pass of B keeps to its end: features 8B, labels B, hidden 4B, logits 2B, probabilities 2B,
  // mean loss 1, seed 1, d logits 2B, layer 1's d input 4B, d weight 8, d bias 2, layer 0's reluGrad 4B,
  // d weight 32, d bias 4 (no d input: the features need none) = 27B + 48; the per-row losses (B,
  // freed once averaged) are live only when far less is.
  const pass = (B: number) => 4 * (27 * B + 48);
  assert.equal(e.perExample.plain, 4 * 27);
  const buffers = 194 * 4 * 4; // parameters, gradient buffer, two moments
  assert.equal(e.fixed.plain, buffers + pass(1) - 4 * 27);
  assert.deepEqual(e.batch, { examples: 3, recompute: null, plain: buffers + pass(3) });
  assert.equal(e.perExample.recompute, null, 'an MLP cannot recompute');
  assert.equal(e.fixed.recompute, null);
});

test('the same MLP in WebGPU buffers: 256 bytes at least, so an example more adds nothing until a tensor outgrows them', () => {
  const e = estimateMemory({ kind: 'mlp', sizes: [8, 4, 2] }, { optimizer: 'sgd', batchSize: 9 });
  assert.equal(e.parameters, 1024); // 776 bytes → 1 KiB
  assert.equal(e.optimizerState, 1024); // SGD's velocity
  assert.equal(e.gradients, 1024 + 4 * 256);
  assert.equal(e.perExample.plain, 0);
  // 14 tensors of at most 64 floats each at 2 examples; at 9 the features (72 floats) take 512 bytes.
  assert.equal(e.fixed.plain, 3 * 1024 + 14 * 256);
  assert.equal(e.batch.plain, 3 * 1024 + 13 * 256 + 512);
});

test('the pool\'s sizes: powers of two from 256 bytes to 1 MiB, then eight an octave; a tensor\'s own size where its bucket passes the binding limit', () => {
  const mib = 2 ** 20;
  assert.equal(pooledBytes(1), 256);
  assert.equal(pooledBytes(64), 256);
  assert.equal(pooledBytes(65), 512);
  assert.equal(pooledBytes(2 ** 18), mib);
  // Past 1 MiB: multiples of a sixteenth of the next power of two (128 KiB up to 2 MiB, 16 MiB up to 256 MiB).
  assert.equal(pooledBytes(2 ** 18 + 1), mib + mib / 8);
  assert.equal(pooledBytes(2 ** 19), 2 * mib);
  assert.equal(pooledBytes(2 ** 19 + 1), 2 * mib + mib / 4);
  assert.equal(pooledBytes(1024 * 50257), 208 * mib); // GPT-2 small's logits, 196.3 MiB
  assert.equal(pooledBytes(50257 * 768), 160 * mib); // its token embedding, 147.2 MiB
  assert.equal(pooledBytes((104 * mib) / 4, 128 * mib), 104 * mib);
  assert.equal(pooledBytes((104 * mib) / 4 + 1, 128 * mib), 112 * mib);
  // 130 MiB pools as 144 MiB; where that passes the binding limit, its own size rounded to 16 bytes.
  assert.equal(pooledBytes((130 * mib) / 4, 200 * mib), 144 * mib);
  assert.equal(pooledBytes((130 * mib) / 4, 140 * mib), 130 * mib);
  assert.equal(pooledBytes((130 * mib) / 4 + 1, 140 * mib), 130 * mib + 16);
  // Past the limit either way, the runtime refuses it; the pool's size stays the bucket.
  assert.equal(pooledBytes((130 * mib) / 4, 100 * mib), 144 * mib);
});

test('a tiny GPT counted by hand, in f32 bytes: an example\'s activations with and without recompute', () => {
  const T = 8, W = 8, H = 2, V = 8, L = 2;
  // V ≤ T: the id grouping holds every id whatever the batch, so its size grows by T an example.
  const e = estimateMemory({ kind: 'gpt', vocab: V, context: T, width: W, heads: H, layers: L }, { optimizer: 'lamb', batchSize: 4, rounding: 'f32' });
  // Floats an example adds, per block: forward ln 1 TW + 2T, c_attn, its permute and the three slices 9TW,
  // attention 3HT² + TW, permute, proj and sum 3TW, ln 2 TW + 2T, fc and gelu 8TW, proj and sum 2TW
  // (25TW + 4T + 3HT²); backward mlp proj's d input and geluGrad 8TW, fc's d input, ln 2's, the sum, proj's,
  // the permute 5TW, attention 3HT² + 3TW, slices 9TW, their sums 6TW, permute 3TW, c_attn's d input, ln
  // 1's, the sum 3TW (37TW + 3HT²). Outside the blocks: ids, grouping, labels 3T, embeddings and their sum
  // 2TW, ln_f TW + 2T, logits, probabilities, d logits 3TV, d ln_f out and ln_f's d input 2TW.
  const perBlock = 62 * T * W + 4 * T + 6 * H * T * T;
  assert.equal(e.perExample.plain, 4 * (L * perBlock + 5 * T * W + 5 * T + 3 * T * V));
  // With recompute the peak is block 0's recompute: one block's forward and backward, beside what the
  // pass holds by then: the ids, grouping, labels, the embeddings' sum, L block outputs, ln_f, the
  // logits' three, the head's and ln_f's d inputs, and the other L − 1 blocks' d inputs.
  assert.equal(e.perExample.recompute, 4 * (perBlock + (4 + 2 * L) * T * W + 5 * T + 3 * T * V));
  const n = architectureLayout(e.architecture).length, tensors = architectureLayout(e.architecture).entries.length;
  assert.equal(e.optimizerState, 4 * (3 * n + 4 * tensors)); // LAMB: m, v, the update; i32 and f32 pairs per tensor
  // Each parameter's own gradient, and the tied embedding's two more (the lookup's, the sum).
  assert.equal(e.gradients, 4 * (n + (n - padding(e.architecture)) + 2 * V * W));
});

const padding = (a: Parameters<typeof architectureLayout>[0]) => {
  const l = architectureLayout(a);
  return l.length - l.entries.reduce((s, p) => s + p.size, 0);
};

test('a job spec\'s defaults: its optimizer and batch; GPT-2 small needs gigabytes an example without recompute', () => {
  const gpt2 = jobSpecSchema.parse({ preset: 'gpt', gpt: { layers: 12, heads: 12, width: 768, context: 1024 }, dataset: 'fortunes', tokenizer: 'gpt2', strategy: 'diloco' });
  const e = estimateJobMemory(gpt2);
  assert.equal(e.optimizer, 'adamw');
  assert.equal(e.batch.examples, 8);
  assert.equal(e.parameters, 480 * 2 ** 20); // 124,439,808 floats (474.7 MiB) pool as 15 × 32 MiB
  assert.equal(e.optimizerState, 2 * e.parameters);
  assert.ok(e.perExample.recompute! > 1e9 && e.perExample.recompute! < 2e9, `${e.perExample.recompute}`);
  assert.ok(e.perExample.plain > 5 * e.perExample.recompute!, `${e.perExample.plain}`);
  assert.ok(e.batch.recompute! < e.batch.plain);
  const mlp = estimateJobMemory(jobSpecSchema.parse({ preset: 'mlp-fashion' }));
  assert.equal(mlp.optimizer, 'sgd');
  assert.equal(mlp.batch.examples, 32);
  assert.equal(mlp.perExample.recompute, null);
  assert.throws(() => estimateJobMemory({ preset: 'gpt', hyperparameters: { optimizer: 'sgd', batchSize: 1 } }), /needs its gpt shape and tokenizer/);
});

test('bad input is refused with the reason', () => {
  const gpt = { kind: 'gpt', vocab: 16, context: 8, width: 8, heads: 2, layers: 1 } as const;
  assert.throws(() => estimateMemory(gpt, { optimizer: null, batchSize: 0 }), /batch size 0: need a positive integer/);
  assert.throws(() => estimateMemory(gpt, { optimizer: null, batchSize: 1.5 }), /batch size 1.5/);
  assert.throws(() => estimateMemory({ ...gpt, width: 9 }, { optimizer: null, batchSize: 1 }), /width 9 is not a multiple of 2 heads/);
  assert.throws(() => estimateMemory({ ...gpt, layers: 0 }, { optimizer: null, batchSize: 1 }), /gpt layers 0: need a positive integer/);
  assert.throws(() => estimateMemory({ kind: 'mlp', sizes: [3] }, { optimizer: null, batchSize: 1 }), /at least input and output sizes/);
  assert.throws(() => estimateMemory({ kind: 'cnn', inChannels: 1, imageSize: 3, channels: [2, 2], hidden: 4, classes: 2 }, { optimizer: null, batchSize: 1 }), /at least 4/);
  assert.throws(() => estimateMemory(gpt, { optimizer: 'adam' as never, batchSize: 1 }), /unknown optimizer "adam"/);
  assert.throws(() => estimateMemory(gpt, { optimizer: null, batchSize: 1, rounding: 'f16' as never }), /unknown rounding/);
  assert.throws(() => estimateMemory(gpt, { optimizer: null, batchSize: 1, bindingLimitBytes: 0 }), /binding limit 0/);
  assert.throws(() => estimateMemory({ kind: 'rnn' } as never, { optimizer: null, batchSize: 1 }), /unknown model kind "rnn"/);
});
