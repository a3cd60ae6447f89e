// Every kernel against the CPU reference in Node, on Dawn's SwiftShader adapter.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createNodeGpuBackend } from './node-gpu';
import { kernelCases, runKernelCase } from './testing/kernel-cases';

const backends = [
  { label: 'register-tiled matmul', opts: { matmulVariant: 'reg' as const } },
  { label: 'shared-memory tiled matmul', opts: { matmulVariant: 'tiled' as const } },
];

for (const { label, opts } of backends) {
  test(`kernels match the CPU reference (${label})`, async (t) => {
    const gpu = await createNodeGpuBackend(opts);
    for (const c of kernelCases()) {
      if (opts.matmulVariant === 'tiled' && !/matmul|linear/.test(c.name)) continue;
      await t.test(c.name, async () => {
        const r = await runKernelCase(gpu, c);
        assert.ok(r.ok, `${c.name}: ${r.detail}`);
      });
    }
  });
}
