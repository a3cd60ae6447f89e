// DiLoCo with block-quantized pseudo-gradients (int8, 4-bit E2M1, error feedback) over real Ring
// collectives on the in-memory transport: every member agrees on every sync, each sends (N−1) × the
// encoded size, and the model trains about as well as with f32 payloads; and the same in an untrusted
// job's group (contributions quantized part by part, decoded before centered clip).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import { gaussianBlobs } from '@tabfleet/data';
import { estimateSyncBytes, PRESET_FLAT_LENGTHS, quantizedBytes } from '@tabfleet/protocol';
import { CpuBackend } from '@tabfleet/tensor';
import { runSyncs, startWorkers } from './simulate';
import type { CompressionName } from './strategies';
import { mlpWorkers } from './workers';

const WORKERS = 4, SYNCS = 4;

async function train(compression: CompressionName, group?: { rule: 'centered-clip' }) {
  const backend = new CpuBackend();
  // Evaluated on the training blobs: another seed draws other blob centres.
  const blobs = gaussianBlobs(2048, 784, 10, 11);
  const data = { train: blobs, test: blobs };
  const workers = mlpWorkers(backend, {
    workers: WORKERS, data, batchSize: 16, seed: 5, optimizer: { kind: 'adamw', lr: 2e-4 },
    strategy: { strategy: 'diloco', H: 4, compression, outerLr: 0.7, outerMomentum: 0.9 },
  });
  await startWorkers(workers);
  // runSyncs fails with 'members disagree' unless every member's checksum is the same after each sync.
  const reports = await runSyncs(workers, new MemoryNetwork({ seed: 1 }), { syncs: SYNCS, group });
  const evaluation = await workers[0].engine.evaluate();
  const untrained = await mlpWorkers(backend, { workers: 1, data, batchSize: 16, seed: 5, optimizer: { kind: 'adamw', lr: 2e-4 },
    strategy: { strategy: 'diloco', H: 4, compression, outerLr: 0.7, outerMomentum: 0.9 } })[0].engine.evaluate();
  return { reports, evaluation, untrained };
}

test('DiLoCo with int8 and E2M1 pseudo-gradients: members agree, bytes as estimated, loss close to f32', async () => {
  const dense = await train('none');
  assert.ok(dense.evaluation.loss < dense.untrained.loss * 0.75, `f32 DiLoCo trained: loss ${dense.untrained.loss} → ${dense.evaluation.loss}`);
  const length = PRESET_FLAT_LENGTHS['mlp-fashion'];
  for (const format of ['int8', 'e2m1'] as const) {
    const q = await train(format);
    assert.equal(q.reports.length, SYNCS);
    // Each member sends every member's encoded vector but its right neighbour's: (N−1) × the encoded size, plus frame headers.
    const payload = (WORKERS - 1) * quantizedBytes(length, format);
    assert.equal(estimateSyncBytes({ preset: 'mlp-fashion', compression: format, sparsity: 0 }, WORKERS), payload);
    for (const r of q.reports) for (const sent of r.bytesSent) assert.ok(sent >= payload && sent < payload * 1.01, `${format}: sent ${sent}, payload ${payload}`);
    const denseBytes = dense.reports[0].bytesSent[0];
    console.log(`${format}: test loss ${q.evaluation.loss.toFixed(4)} (f32 ${dense.evaluation.loss.toFixed(4)}), ` +
      `accuracy ${q.evaluation.accuracy} (f32 ${dense.evaluation.accuracy}), ${(denseBytes / q.reports[0].bytesSent[0]).toFixed(2)}× fewer bytes a sync`);
    assert.ok(q.evaluation.loss < dense.evaluation.loss * 1.1 + 0.02, `${format}: test loss ${q.evaluation.loss} against f32's ${dense.evaluation.loss}`);
    assert.ok(q.evaluation.accuracy >= dense.evaluation.accuracy - 0.03, `${format}: accuracy ${q.evaluation.accuracy} against f32's ${dense.evaluation.accuracy}`);
  }
});

test('DiLoCo with E2M1 contributions in an untrusted group under centered clip: members agree, bytes as estimated, loss close to f32', async () => {
  const group = { rule: 'centered-clip' as const };
  const dense = await train('none', group);
  const q = await train('e2m1', group);
  assert.equal(q.reports.length, SYNCS);
  assert.ok(q.reports.every((r) => r.refused.length === 0), 'no honest contribution refused');
  const estimate = estimateSyncBytes({ preset: 'mlp-fashion', compression: 'e2m1', sparsity: 0, trust: 'untrusted' }, WORKERS);
  // Parts are cut along the 64-value blocks, so each member's share of scales and aggregates differs a little from the estimate's even split.
  for (const r of q.reports) for (const sent of r.bytesSent) assert.ok(Math.abs(sent / estimate - 1) < 0.02, `sent ${sent}, estimated ${estimate}`);
  console.log(`e2m1 in a group: test loss ${q.evaluation.loss.toFixed(4)} (f32 ${dense.evaluation.loss.toFixed(4)}), ` +
    `${(dense.reports[0].bytesSent[0] / q.reports[0].bytesSent[0]).toFixed(2)}× fewer bytes a sync`);
  assert.ok(q.evaluation.loss < dense.evaluation.loss * 1.1 + 0.02, `test loss ${q.evaluation.loss} against f32's ${dense.evaluation.loss}`);
});
