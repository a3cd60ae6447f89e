import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createModel, createOptimizer, presetOf, trainStep } from '@tabfleet/nn';
import { encodeSafetensors, f32Tensor, jobSpecSchema } from '@tabfleet/protocol';
import { CpuBackend } from '@tabfleet/tensor';
import { bytesTokenizer, charsTokenizer, loadTokenizer } from '@tabfleet/data';
import { Sampler, streamDecoder } from './sampler';

const spec = jobSpecSchema.parse({
  preset: 'gpt', gpt: { layers: 1, heads: 2, width: 32, context: 16 }, dataset: 'text-corpus', tokenizer: 'bytes', strategy: 'localsgd', H: 1,
  hyperparameters: { lr: 1e-2, batchSize: 2 }, targetSteps: 10,
});

test('streamed decoding: a character split across tokens shows once it is whole, for bytes and GPT-2 BPE', async () => {
  const ids = bytesTokenizer.encode('é!');
  assert.deepEqual([...ids], [0xc3, 0xa9, 0x21]);
  const decode = streamDecoder(bytesTokenizer);
  assert.deepEqual([...ids].map(decode), ['', 'é', '!']);
  assert.throws(() => charsTokenizer.encode('Hé'), /"H" is not among them/);
  const gpt2 = await loadTokenizer('gpt2');
  // GPT-2's byte-level BPE: "Hello world" is [15496, 995]; an emoji takes several byte tokens.
  assert.deepEqual([...gpt2.encode('Hello world')], [15496, 995]);
  const text = 'Tea 🍵 time';
  const pieces = [...gpt2.encode(text)].map(streamDecoder(gpt2));
  assert.equal(pieces.join(''), text);
  assert.ok(pieces.every((p) => !p.includes('\uFFFD')), JSON.stringify(pieces));
});

test('a checkpoint of a GPT that learned "abc" repeated samples it back, from the job spec alone', async () => {
  const be = new CpuBackend('f32');
  const model = createModel(presetOf(spec), be, 1);
  const opt = createOptimizer(model.store, { kind: 'adamw', lr: 3e-3 });
  const text = 'abc'.repeat(12);
  const bytes = new TextEncoder().encode(text);
  const x = Int32Array.from([0, 1, 2].flatMap((s) => [...bytes.subarray(s, s + 16)]));
  const y = Int32Array.from([0, 1, 2].flatMap((s) => [...bytes.subarray(s + 1, s + 17)]));
  let loss = Infinity;
  for (let step = 0; step < 100; step++) loss = await trainStep(model, opt, { x, y, size: 3 });
  assert.ok(loss < 0.05, `trained to loss ${loss}`);
  const sampler = await Sampler.load(new CpuBackend('f32'), spec, await model.store.toSafetensors());
  const pieces: string[] = [];
  const out = await sampler.sample({ prompt: 'ab', length: 7, temperature: 0, topK: 0, seed: 1 }, (p) => pieces.push(p));
  assert.equal(out, 'cabcabc');
  assert.equal(pieces.join(''), out);
  // A checkpoint of another model is refused as the server refuses it.
  await assert.rejects(Sampler.load(be, spec, encodeSafetensors({ 'layers.0.weight': f32Tensor([1], new Float32Array(1)) })), /lacks transformer.wte.weight/);
});
