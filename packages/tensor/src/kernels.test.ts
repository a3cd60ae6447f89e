// Every kernel against the CPU reference in Node, on Dawn's SwiftShader adapter.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createNodeGpuBackend } from './node-gpu';
import { kernelCases, runKernelCase } from './testing/kernel-cases';

// The CPU-adapter defaults run every case; each alternative variant reruns the cases it affects.
const backends = [
  { label: 'CPU-adapter defaults: unrolled/register matmul, im2col conv', opts: {}, only: null },
  { label: 'shared-memory tiled matmul', opts: { matmulVariant: 'tiled' as const }, only: /matmul|linear/ },
  { label: 'direct implicit-GEMM conv', opts: { convVariant: 'direct' as const }, only: /conv|CNN/ },
  { label: 'a workgroup per softmax and layernorm row', opts: { rowVariant: 'workgroup' as const }, only: /softmax|layernorm|attention|transformer|GPT/i },
];

for (const { label, opts, only } of backends) {
  test(`kernels match the CPU reference (${label})`, async (t) => {
    const gpu = await createNodeGpuBackend(opts);
    for (const c of kernelCases()) {
      if (only && !only.test(c.name)) continue;
      await t.test(c.name, async () => {
        const r = await runKernelCase(gpu, c);
        assert.ok(r.ok, `${c.name}: ${r.detail}`);
      });
    }
  });
}
