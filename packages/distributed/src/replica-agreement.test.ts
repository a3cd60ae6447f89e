import assert from 'node:assert/strict';
import { test } from 'node:test';
import { gaussianBlobs, type Dataset } from '@tabfleet/data';
import { PRESETS } from '@tabfleet/nn';
import { CpuBackend } from '@tabfleet/tensor';
import { ModelEngine } from './engine';
import { measureReplicaAgreement } from './replica-agreement';

const all = gaussianBlobs(2048, 784, 10, 5);
const data = { train: { ...all, count: 1536 } as Dataset, test: { ...all, x: all.x.subarray(1536 * 784), y: all.y.subarray(1536), count: 512 } as Dataset };
const opts = { units: 3, steps: 4, batchSize: 16, optimizer: { kind: 'sgd' as const, lr: 0.05, momentum: 0.9, nesterov: true }, shard: 1, shards: 4, seed: 2 };

test('one backend twice: every unit identical, and a result 1.5× too long refused', async () => {
  const units = await measureReplicaAgreement([new CpuBackend('f32'), new CpuBackend('f32')], data, opts);
  assert.equal(units.length, 3);
  for (const u of units) {
    assert.ok(Math.abs(u.cosine - 1) < 1e-12, `cosine ${u.cosine}`);
    assert.equal(u.normDifference, 0, 'the same bits');
    assert.ok(u.agree && !u.faultyAgrees);
  }
});

test('a unit is its seed alone: whatever the engine trained before, a fresh optimizer on the same batches gives the same delta', async () => {
  const shard = Int32Array.from({ length: 512 }, (_, i) => i);
  const make = () => new ModelEngine(new CpuBackend('f32'), {
    preset: PRESETS['mlp-fashion'], seed: 1, optimizer: opts.optimizer, batchSize: 16, train: data.train, test: data.test, shard, dataSeed: 9,
  });
  const a = make(), b = make();
  await b.trainSteps(5); // b's own history: momentum and batch position differ from a's
  b.writeParams(await a.readParams());
  await a.trainUnit({ batchSeed: 77, steps: 3 });
  await b.trainUnit({ batchSeed: 77, steps: 3 });
  assert.deepEqual(await a.readParams(), await b.readParams());
});
