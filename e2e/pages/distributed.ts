// N workers of one job in this page, sharing its WebGPU device, synced by real Ring collectives over
// the in-memory transport: the convergence tests and `npm run bench -- convergence` drive this.
import { loadFashionMnistFromUrl, type Dataset } from '@tabfleet/data';
import { runConvergence, type ConvergenceConfig, type ConvergenceResult } from '@tabfleet/distributed';
import { WebGpuBackend } from '@tabfleet/tensor';

const out = document.getElementById('out')!;
let data: Promise<{ train: Dataset; test: Dataset }> | null = null;
let backend: Promise<WebGpuBackend> | null = null;

async function run(cfg: ConvergenceConfig): Promise<ConvergenceResult & { adapter: string }> {
  backend ??= WebGpuBackend.create(navigator.gpu);
  data ??= loadFashionMnistFromUrl(`${location.origin}/datasets/fashion-mnist`);
  const [be, d] = await Promise.all([backend, data]);
  const result = await runConvergence(be, d, cfg, (line) => {
    out.textContent = line;
    console.log(line);
  });
  return { ...result, adapter: be.description };
}

declare global {
  interface Window {
    tabfleetDistributed: { run: typeof run };
  }
}
window.tabfleetDistributed = { run };
out.textContent = 'ready';
