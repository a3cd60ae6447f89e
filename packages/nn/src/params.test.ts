import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CpuBackend } from '@tabfleet/tensor';
import { createNodeGpuBackend } from '@tabfleet/tensor/node';
import { gaussianBlobs, epochBatches, sequentialBatches, shardIndices } from '@tabfleet/data';
import { FIXED_PRESETS, PRESET_FLAT_LENGTHS, PRESET_LAYOUTS, decodeSafetensors, gptLayout, jobSpecSchema, layoutOf, modelDigest, verifyCheckpoint } from '@tabfleet/protocol';
import { createModel, presetOf, PRESETS, type GptPreset } from './models/index';
import { createOptimizer } from './optim';
import { PARAM_ALIGN } from './params';
import { evaluate, recordTrainStep, trainStep } from './train';

test('the manifest lists every parameter once, in order, at 256-byte aligned offsets', () => {
  const m = createModel(PRESETS['cnn-fashion'], new CpuBackend(), 1);
  const man = m.store.manifest;
  assert.deepEqual(man.map((e) => e.name), ['conv1.weight', 'conv1.bias', 'conv2.weight', 'conv2.bias', 'fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias']);
  for (let i = 0; i < man.length; i++) {
    assert.equal(man[i].offset % PARAM_ALIGN, 0);
    if (i > 0) assert.ok(man[i].offset >= man[i - 1].offset + man[i - 1].size);
  }
  assert.deepEqual(man[0].shape, [8, 1, 3, 3]);
});

test('the protocol knows the flat parameter length of every preset (the server checks updates against it)', () => {
  for (const [name, preset] of Object.entries(PRESETS)) {
    assert.equal(PRESET_FLAT_LENGTHS[name as keyof typeof PRESETS], createModel(preset, new CpuBackend(), 1).store.length, name);
  }
  assert.deepEqual(Object.keys(PRESETS).sort(), [...FIXED_PRESETS].sort());
});

test('the protocol knows every preset parameter layout, and reads a real checkpoint to the digest the workers compute', async () => {
  for (const [name, preset] of Object.entries(PRESETS)) {
    const model = createModel(preset, new CpuBackend(), 3);
    const layout = PRESET_LAYOUTS[name as keyof typeof PRESETS];
    assert.deepEqual(layout.entries, model.store.manifest, name);
    assert.equal(layout.length, model.store.length, name);
    const verified = verifyCheckpoint(name as keyof typeof PRESETS, await model.store.toSafetensors());
    assert.equal(verified.digest, modelDigest(await model.store.readFlat()), name);
  }
});

test('a GPT declares nanoGPT\'s parameters in its order, as the protocol lays them out; its checkpoint verifies against the job', async () => {
  const spec = jobSpecSchema.parse({
    preset: 'gpt', gpt: { layers: 2, heads: 2, width: 16, context: 8 }, dataset: 'text-corpus', tokenizer: 'bytes', strategy: 'localsgd', H: 2,
    hyperparameters: { lr: 1e-3, batchSize: 4 }, targetSteps: 10,
  });
  const preset = presetOf(spec) as GptPreset;
  assert.deepEqual(preset, { kind: 'gpt', layers: 2, heads: 2, width: 16, context: 8, vocab: 256 });
  const model = createModel(preset, new CpuBackend(), 3);
  assert.deepEqual(layoutOf(spec).entries, model.store.manifest);
  assert.equal(layoutOf(spec).length, model.store.length);
  const names = model.store.manifest.map((e) => e.name);
  assert.deepEqual(names.slice(0, 14), [
    'transformer.wte.weight', 'transformer.wpe.weight',
    'transformer.h.0.ln_1.weight', 'transformer.h.0.ln_1.bias', 'transformer.h.0.attn.c_attn.weight', 'transformer.h.0.attn.c_attn.bias',
    'transformer.h.0.attn.c_proj.weight', 'transformer.h.0.attn.c_proj.bias', 'transformer.h.0.ln_2.weight', 'transformer.h.0.ln_2.bias',
    'transformer.h.0.mlp.c_fc.weight', 'transformer.h.0.mlp.c_fc.bias', 'transformer.h.0.mlp.c_proj.weight', 'transformer.h.0.mlp.c_proj.bias',
  ]);
  assert.deepEqual(names.slice(-2), ['transformer.ln_f.weight', 'transformer.ln_f.bias']);
  assert.ok(!names.includes('lm_head.weight'), 'the head is tied to wte, not stored');
  // PyTorch layouts: Linear weights are [out, in].
  assert.deepEqual(model.store.manifest.find((e) => e.name === 'transformer.h.1.attn.c_attn.weight')!.shape, [48, 16]);
  assert.deepEqual(model.store.manifest.find((e) => e.name === 'transformer.h.1.mlp.c_proj.weight')!.shape, [16, 64]);
  // nanoGPT's init: N(0, 0.02) weights, residual projections N(0, 0.02/√(2·layers)), zero biases.
  const flat = await model.store.readFlat();
  const std = (name: string) => {
    const e = model.store.manifest.find((m) => m.name === name)!;
    const v = flat.subarray(e.offset, e.offset + e.size);
    return Math.sqrt(v.reduce((a, x) => a + x * x, 0) / v.length);
  };
  assert.ok(Math.abs(std('transformer.wte.weight') - 0.02) < 0.002, `wte std ${std('transformer.wte.weight')}`);
  assert.ok(Math.abs(std('transformer.h.0.mlp.c_proj.weight') - 0.01) < 0.0015, `c_proj std ${std('transformer.h.0.mlp.c_proj.weight')}`);
  assert.equal(std('transformer.h.0.attn.c_attn.bias'), 0);
  const bytes = await model.store.toSafetensors();
  assert.equal(verifyCheckpoint(spec, bytes).digest, modelDigest(flat));
  assert.deepEqual(Object.keys(decodeSafetensors(bytes).tensors).sort(), [...names].sort());
  // A checkpoint of another shape is not this job's model.
  const other = createModel({ ...preset, width: 8 }, new CpuBackend(), 3);
  const otherBytes = await other.store.toSafetensors();
  assert.throws(() => verifyCheckpoint(spec, otherBytes), /transformer.wte.weight is F32\[256,8\], the gpt model has F32\[256,16\]/);
  assert.equal(gptLayout({ ...preset }).length, model.store.length);
});

test('seeded init is identical across backends and differs across seeds', async () => {
  const a = createModel(PRESETS['mlp-fashion'], new CpuBackend(), 5);
  const b = createModel(PRESETS['mlp-fashion'], await createNodeGpuBackend(), 5);
  const c = createModel(PRESETS['mlp-fashion'], new CpuBackend(), 6);
  assert.deepEqual(await a.store.readFlat(), await b.store.readFlat());
  assert.notDeepEqual(await a.store.readFlat(), await c.store.readFlat());
});

test('a checkpoint saved from the GPU loads into a CPU model and predicts the same', async () => {
  const gpu = await createNodeGpuBackend();
  const ds = gaussianBlobs(256, 784, 10, 3);
  const src = createModel(PRESETS['mlp-fashion'], gpu, 2);
  const opt = createOptimizer(src.store, { kind: 'sgd', lr: 0.05, momentum: 0.9 });
  for (const b of epochBatches(ds, shardIndices(ds.count, 0, 1, 1), 64, 1, 0)) await trainStep(src, opt, b);
  const bytes = await src.store.toSafetensors({ preset: JSON.stringify(PRESETS['mlp-fashion']) });
  const dst = createModel(PRESETS['mlp-fashion'], new CpuBackend(), 99);
  const meta = dst.store.loadSafetensors(bytes);
  assert.equal(JSON.parse(meta.preset).kind, 'mlp');
  const [e1, e2] = [await evaluate(src, sequentialBatches(ds, 128)), await evaluate(dst, sequentialBatches(ds, 128))];
  assert.equal(e1.accuracy, e2.accuracy);
  assert.ok(Math.abs(e1.loss - e2.loss) < 1e-4);
});

test('loading a checkpoint with a missing tensor or a wrong shape fails and leaves the model unchanged', async () => {
  const m = createModel(PRESETS['mlp-fashion'], new CpuBackend(), 1);
  const before = await m.store.readFlat();
  const other = createModel({ kind: 'mlp', sizes: [784, 128, 10] }, new CpuBackend(), 1);
  assert.throws(() => m.store.loadSafetensors(new Uint8Array(0)), /shorter/);
  const wrongShape = await other.store.toSafetensors();
  assert.throws(() => m.store.loadSafetensors(wrongShape), /shape/);
  const cnn = createModel(PRESETS['cnn-fashion'], new CpuBackend(), 1);
  const otherModel = await cnn.store.toSafetensors();
  assert.throws(() => m.store.loadSafetensors(otherModel), /no tensor layers\.0\.weight/);
  assert.deepEqual(await m.store.readFlat(), before);
});

test('a GPU training step is one command buffer with the loss as its only readback', async () => {
  const gpu = await createNodeGpuBackend();
  const ds = gaussianBlobs(128, 784, 10, 1);
  const m = createModel(PRESETS['mlp-fashion'], gpu, 1);
  const opt = createOptimizer(m.store, { kind: 'sgd', lr: 0.01 });
  const [batch] = [...epochBatches(ds, shardIndices(ds.count, 0, 1, 1), 128, 1, 0)];
  await trainStep(m, opt, batch); // warm-up: pipelines and pooled buffers
  const before = { ...gpu.rt.counters };
  await trainStep(m, opt, batch);
  const after = gpu.rt.counters;
  assert.equal(after.readbacks - before.readbacks, 1);
  assert.equal(after.submits - before.submits, 1, 'one command buffer per step');
  assert.ok(after.dispatches - before.dispatches >= 8);
  const loss = recordTrainStep(m, opt, batch);
  assert.equal(loss.shape.join(), '1');
});

test('the MLP learns synthetic blobs on the GPU', async () => {
  const gpu = await createNodeGpuBackend();
  const train = gaussianBlobs(2048, 784, 10, 11);
  const m = createModel(PRESETS['mlp-fashion'], gpu, 1);
  const opt = createOptimizer(m.store, { kind: 'adamw', lr: 1e-3 });
  for (let e = 0; e < 2; e++) for (const b of epochBatches(train, shardIndices(train.count, 0, 1, 1), 64, 1, e)) await trainStep(m, opt, b);
  const r = await evaluate(m, sequentialBatches(train, 512));
  assert.ok(r.accuracy > 0.95, `accuracy ${r.accuracy}`);
});

test('optimizer state round-trips: a copy loaded with it takes the same next step', async () => {
  const data = gaussianBlobs(64, 784, 10, 2);
  for (const cfg of [{ kind: 'sgd' as const, lr: 0.05, momentum: 0.9 }, { kind: 'adamw' as const, lr: 1e-3 }]) {
    const a = createModel(PRESETS['mlp-fashion'], new CpuBackend(), 1);
    const optA = createOptimizer(a.store, cfg);
    const batches = [...sequentialBatches(data, 16)];
    for (const b of batches.slice(0, 3)) await trainStep(a, optA, b);
    const b = createModel(PRESETS['mlp-fashion'], new CpuBackend(), 7);
    const optB = createOptimizer(b.store, cfg);
    b.store.writeFlat(await a.store.readFlat());
    optB.loadState(await optA.readState());
    await trainStep(a, optA, batches[3]);
    await trainStep(b, optB, batches[3]);
    assert.deepEqual(await b.store.readFlat(), await a.store.readFlat(), cfg.kind);
    assert.throws(() => optB.loadState(Object.fromEntries(Object.keys(cfg.kind === 'sgd' ? { velocity: 0 } : { m: 0 }).map((k) => [k, new Float32Array(3)]))), /has 3 values/);
  }
});
