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
  // The flat gradient buffer only: each parameter's gradient tensor is freed once copied into it.
  assert.equal(e.gradients, 194 * 4);
  // Floats of a pass of B, in the order made: features 8B and labels B (uploaded before the pass);
  // hidden 4B, logits 2B; the per-row losses B, probabilities 2B, mean loss 1 (the losses freed once
  // averaged); backward's seed 1, d logits 2B (the seed freed); layer 1's d input 4B, d weight 8, d bias
  // 2 (d logits freed); layer 0's reluGrad 4B (kept to the pass's end), d weight 32, d bias 4 (no d
  // input: the features need none). That is the peak: 25B + 47. Then layer 1's d input is freed, and
  // each parameter's gradient once copied into the flat buffer.
  const pass = (B: number) => 4 * (25 * B + 47);
  assert.equal(e.perExample.plain, 4 * 25);
  const buffers = 194 * 4 * 4; // parameters, gradient buffer, two moments
  assert.equal(e.fixed.plain, buffers + pass(1) - 4 * 25);
  assert.deepEqual(e.batch, { examples: 3, recompute: null, plain: buffers + pass(3) });
  assert.equal(e.perExample.recompute, null, 'an MLP cannot recompute');
  assert.equal(e.fixed.recompute, null);
});

test('the same MLP in WebGPU buffers: 256 bytes at least, so an example more adds nothing until a tensor outgrows them', () => {
  const e = estimateMemory({ kind: 'mlp', sizes: [8, 4, 2] }, { optimizer: 'sgd', batchSize: 9 });
  assert.equal(e.parameters, 1024); // 776 bytes → 1 KiB
  assert.equal(e.optimizerState, 1024); // SGD's velocity
  assert.equal(e.gradients, 1024);
  assert.equal(e.perExample.plain, 0);
  // The peak above holds 12 tensors (features, labels, hidden, logits, probabilities, mean loss, layer 1's
  // d input, d weight, d bias, layer 0's reluGrad, d weight, d bias), each of at most 64 floats at 2
  // examples; at 9 the features (72 floats) take 512 bytes.
  assert.equal(e.fixed.plain, 3 * 1024 + 12 * 256);
  assert.equal(e.batch.plain, 3 * 1024 + 11 * 256 + 512);
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
  // Floats an example adds to the forward, all kept to the pass's end. Per block: ln 1 TW + 2T, c_attn,
  // its permute and the three slices 9TW, attention 3HT² + TW, permute, proj and sum 3TW, ln 2 TW + 2T,
  // fc and gelu 8TW, proj and sum 2TW (25TW + 4T + 3HT²). Outside the blocks: ids, grouping, labels 3T,
  // token embeddings and their sum with the positions' 2TW, ln_f TW + 2T, logits and probabilities 2TV.
  const block = 25 * T * W + 4 * T + 3 * H * T * T;
  const forward = L * block + 3 * T * W + 5 * T + 2 * T * V;
  // Backward frees each activation gradient once its node has used it (the GPT's backward functions keep
  // nothing of their own), so an example's gradients peak inside a block: at block 0's q | k | v, where
  // the slices' gradients (each the whole 3TW) are summed: the first, the second and their sum 9TW, the
  // second slice's d output and the third's 2TW, and d x1 waiting for the block input TW: 12TW.
  assert.equal(e.perExample.plain, 4 * (forward + 12 * T * W));
  // With recompute, the same point in block 0's recompute: beside its forward again and those 12TW, the
  // pass holds the ids, grouping and labels 3T, token embeddings and their sum 2TW, the L block outputs,
  // ln_f TW + 2T, logits and probabilities 2TV, and the block's d output TW (the recompute's scope
  // cannot free it; the pass's frees it once the block is done).
  assert.equal(e.perExample.recompute, 4 * (block + 12 * T * W + 3 * T + (3 + L) * T * W + 2 * T + 2 * T * V + T * W));
  // What the pass holds at that point whatever the batch: the position ids and their grouping 4T + 1,
  // the position embeddings TW, the ids' grouping's distinct ids and starts 2V + 1, the mean loss 1, and
  // the parameters' gradients not yet reached, which is most of them: leaves come last in the order
  // (a node's inputs after it), so only a leaf's copy frees its gradient. Pending then: the head's d wte
  // VW, ln_f's 2W, all of block 1's 12W² + 13W, and block 0's so far (mlp proj, fc, ln 2, attn proj)
  // 9W² + 8W. The same with recompute (block 1 returned its parameters' gradients to the pass).
  const n = architectureLayout(e.architecture).length, tensors = architectureLayout(e.architecture).entries.length;
  const fixedPass = 4 * T + 1 + T * W + 2 * V + 1 + 1 + V * W + 2 * W + 21 * W * W + 21 * W;
  assert.equal(e.optimizerState, 4 * (3 * n + 4 * tensors)); // LAMB: m, v, the update; i32 and f32 pairs per tensor
  const buffers = 4 * 2 * n + e.optimizerState;
  assert.equal(e.fixed.plain, buffers + 4 * fixedPass);
  assert.equal(e.fixed.recompute, buffers + 4 * fixedPass);
  // Linear in the batch: the peak is at the same point for 4 examples.
  assert.deepEqual(e.batch, { examples: 4, plain: e.fixed.plain + 4 * e.perExample.plain, recompute: e.fixed.recompute! + 4 * e.perExample.recompute! });
  assert.equal(e.gradients, 4 * n, 'the flat gradient buffer alone');
});

test('a job spec\'s defaults: its optimizer and batch; GPT-2 small needs gigabytes an example without recompute', () => {
  const gpt2 = jobSpecSchema.parse({ preset: 'gpt', gpt: { layers: 12, heads: 12, width: 768, context: 1024 }, dataset: 'fortunes', tokenizer: 'gpt2', strategy: 'diloco' });
  const e = estimateJobMemory(gpt2);
  assert.equal(e.optimizer, 'adamw');
  assert.equal(e.batch.examples, 8);
  assert.equal(e.parameters, 480 * 2 ** 20); // 124,439,808 floats (474.7 MiB) pool as 15 × 32 MiB
  assert.equal(e.optimizerState, 2 * e.parameters);
  assert.ok(e.perExample.recompute! > 5e8 && e.perExample.recompute! < 1e9, `${e.perExample.recompute}`);
  assert.ok(e.perExample.plain > 3e9 && e.perExample.plain > 3 * e.perExample.recompute!, `${e.perExample.plain}`);
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
