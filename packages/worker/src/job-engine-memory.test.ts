// A tab plans its steps with what the job holds beside them already allocated (WebGPU on SwiftShader,
// with a budget). A DiLoCo + DGC job holds DGC's accumulator and the scratch buffer its host-side
// delta is compressed from, each as large as the model. They used to be allocated after the plan, so
// a budget that the plan filled with the whole batch ran out at the first sync.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jobSpecSchema, type Assignment } from '@tabfleet/protocol';
import { HEADROOM } from '@tabfleet/nn';
import { createNodeGpuBackend } from '@tabfleet/tensor/node';
import { JobEngine } from './job-engine';

const job = (compression: 'none' | 'dgc'): Assignment => ({
  job: {
    id: 'job-memory',
    spec: jobSpecSchema.parse({
      preset: 'gpt', gpt: { layers: 2, heads: 2, width: 64, context: 32 }, dataset: 'text-corpus', strategy: 'diloco', H: 2, compression, trust: 'trusted',
      recompute: 'off', hyperparameters: { batchSize: 8 },
    }),
  },
  shard: { index: 0, count: 1 },
});
/** No server: the text corpus is generated in the tab. */
const NO_SERVER = 'http://127.0.0.1:9';

test('a DiLoCo + DGC job plans its steps around the DGC buffers, and its first sync fits the budget', { timeout: 180_000 }, async () => {
  // What the plain batch of 8 peaks at without DGC's buffers: the old plan's whole-batch threshold.
  const unbounded = await new JobEngine(await createNodeGpuBackend()).setup(job('none'), NO_SERVER);
  assert.equal(unbounded.memory.microBatch, 8);
  const budget = unbounded.memory.predictedPeakBytes / HEADROOM + 1024;
  const be = await createNodeGpuBackend({ memoryBudgetBytes: budget });
  const engine = new JobEngine(be);
  const info = await engine.setup(job('dgc'), NO_SERVER);
  // The old order planned the whole batch in one pass here (the buffers were not live yet).
  assert.ok(info.memory.microBatch < 8, `${info.memory.reason}: micro-batch ${info.memory.microBatch}`);
  assert.ok(info.memory.predictedPeakBytes <= HEADROOM * budget, `predicted ${info.memory.predictedPeakBytes} B`);
  await engine.loadModel(null, 0);
  // A sync's local work and its DGC payload. Before: GpuOutOfMemoryError past the budget.
  for (let sync = 0; sync < 2; sync++) {
    await engine.local();
    const payload = await engine.payload();
    assert.equal(payload.kind, 'sparse');
    await engine.prepare(new Float32Array(info.length));
    await engine.commit();
  }
  assert.ok(be.memory().peakBytes <= budget, `peak ${be.memory().peakBytes} B past the budget ${budget} B`);
});
