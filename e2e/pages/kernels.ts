// Runs the shared kernel table (GPU vs CPU reference) on this browser's WebGPU adapter.
import { WebGpuBackend } from '@tabfleet/tensor';
import { kernelCases, runKernelCase, type CaseResult } from '@tabfleet/tensor/testing';

async function runKernelSuite(variant?: 'unrolled' | 'tiled'): Promise<{ adapter: string; results: CaseResult[] }> {
  const gpu = await WebGpuBackend.create(navigator.gpu, variant ? { matmulVariant: variant } : {});
  const results: CaseResult[] = [];
  for (const c of kernelCases()) {
    if (variant === 'tiled' && !/matmul|linear/.test(c.name)) continue;
    results.push(await runKernelCase(gpu, c));
  }
  const failed = results.filter((r) => !r.ok);
  document.getElementById('out')!.textContent = `${gpu.description}\n${results.length - failed.length}/${results.length} passed\n${failed.map((f) => `${f.name}: ${f.detail}`).join('\n')}`;
  return { adapter: gpu.description, results };
}

declare global {
  interface Window {
    runKernelSuite: typeof runKernelSuite;
  }
}
window.runKernelSuite = runKernelSuite;
