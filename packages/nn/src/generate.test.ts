import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '@tabfleet/protocol';
import { CpuBackend } from '@tabfleet/tensor';
import { createNodeGpuBackend } from '@tabfleet/tensor/node';
import { drawId, generate } from './generate';
import { createModel, type GptPreset } from './models/index';
import { createOptimizer } from './optim';
import { trainStep } from './train';

const preset: GptPreset = { kind: 'gpt', vocab: 16, context: 12, width: 32, heads: 2, layers: 2 };
/** The sequence a model learns: 0 1 2 … 9 0 1 2 …, so the next id is always (id + 1) mod 10. */
const cycle = (start: number, n: number) => Int32Array.from({ length: n }, (_, i) => (start + i) % 10);

test('drawId: greedy at temperature 0 and top-k 1, only the top k drawn, draws follow the softmax', () => {
  const logits = Float32Array.of(0, 3, 1, 2.9, -5);
  const rng = new Rng(1);
  assert.equal(drawId(logits, 0, 0, rng), 1);
  assert.equal(drawId(logits, 2, 1, rng), 1);
  const counts = [0, 0, 0, 0, 0];
  for (let i = 0; i < 4000; i++) counts[drawId(logits, 1, 2, rng)]++;
  assert.equal(counts[0] + counts[2] + counts[4], 0, `only ids 1 and 3: ${counts}`);
  // p(1) / p(3) = e^0.1 = 1.105: 2100 against 1900 expected.
  assert.ok(Math.abs(counts[1] / 4000 - 0.525) < 0.03, `${counts}`);
});

test('a GPT that learned a cycle continues it from a prompt, greedy and at low temperature; GPU and CPU draw the same ids', async () => {
  const cpu = new CpuBackend('f32');
  const model = createModel(preset, cpu, 1);
  const opt = createOptimizer(model.store, { kind: 'adamw', lr: 1e-2 });
  for (let step = 0; step < 150; step++) {
    const starts = [step % 10, (step * 3 + 1) % 10];
    const x = Int32Array.from(starts.flatMap((s) => [...cycle(s, 12)]));
    const y = Int32Array.from(starts.flatMap((s) => [...cycle(s + 1, 12)]));
    await trainStep(model, opt, { x, y, size: 2 });
  }
  const streamed: number[] = [];
  const greedy = await generate(model, Int32Array.of(3, 4, 5), { length: 15, temperature: 0, topK: 0, seed: 1, onToken: (id) => streamed.push(id) });
  assert.deepEqual([...greedy], [...cycle(6, 15)], 'continues the cycle past the context window');
  assert.deepEqual(streamed, [...greedy]);
  const warm = await generate(model, Int32Array.of(7), { length: 8, temperature: 0.5, topK: 3, seed: 2 });
  assert.deepEqual([...warm], [...cycle(8, 8)]);
  const gpu = createModel(preset, await createNodeGpuBackend(), 1);
  gpu.store.writeFlat(await model.store.readFlat());
  assert.deepEqual([...(await generate(gpu, Int32Array.of(3, 4, 5), { length: 15, temperature: 0, topK: 0, seed: 1 }))], [...greedy]);
  await assert.rejects(generate(model, new Int32Array(0), { length: 1, temperature: 0, topK: 0, seed: 1 }), /at least one token/);
});
