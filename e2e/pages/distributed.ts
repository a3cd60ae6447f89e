// N workers of one job in this page, sharing its WebGPU device, synced by real Ring collectives over
// the in-memory transport: the convergence tests and `npm run bench -- convergence` drive this. Also
// the agreement of WebGPU and the CPU reference on replicated work units (redundant recompute).
import { loadFashionMnistFromUrl, type Dataset } from '@tabfleet/data';
import { measureReplicaAgreement, runConvergence, type AgreementConfig, type ConvergenceConfig, type ConvergenceResult, type UnitAgreement } from '@tabfleet/distributed';
import { CpuBackend, WebGpuBackend } from '@tabfleet/tensor';

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

/** Redundant recompute's tolerance: one unit on this page's WebGPU adapter and on the CPU reference. */
async function replicaAgreement(cfg: AgreementConfig): Promise<{ adapter: string; units: UnitAgreement[] }> {
  backend ??= WebGpuBackend.create(navigator.gpu);
  data ??= loadFashionMnistFromUrl(`${location.origin}/datasets/fashion-mnist`);
  const [be, d] = await Promise.all([backend, data]);
  return { adapter: be.description, units: await measureReplicaAgreement([be, new CpuBackend('f32')], d, cfg) };
}

declare global {
  interface Window {
    tabfleetDistributed: { run: typeof run; replicaAgreement: typeof replicaAgreement };
  }
}
window.tabfleetDistributed = { run, replicaAgreement };
out.textContent = 'ready';
