// N workers of one job in this page, sharing its WebGPU device, synced by real Ring collectives over
// the in-memory transport: the convergence tests and `npm run bench -- convergence` drive this, and
// GPT runs on token windows (`npm run bench -- lm`). Also the agreement of WebGPU and the CPU
// reference on replicated work units (redundant recompute).
import { decodeTextShard, loadFashionMnistFromUrl, type Dataset } from '@tabfleet/data';
import { measureReplicaAgreement, runConvergence, runLmConvergence, type AgreementConfig, type ConvergenceConfig, type ConvergenceResult, type LmRunConfig, type LmRunResult,
  type UnitAgreement } from '@tabfleet/distributed';
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

const textShards = new Map<string, Promise<Dataset>>();

/** Token windows (a text shard, `encodeTextShard`) from a URL the caller serves, fetched once. */
function textShard(url: string, vocab: number): Promise<Dataset> {
  let p = textShards.get(url);
  if (!p) {
    p = fetch(url).then(async (res) => {
      if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status}`);
      return decodeTextShard(new Uint8Array(await res.arrayBuffer()), vocab);
    });
    textShards.set(url, p);
  }
  return p;
}

/** A GPT run (`npm run bench -- lm`) on the training and validation windows at these URLs. */
async function runLm(cfg: LmRunConfig, urls: { train: string; validation: string }): Promise<LmRunResult & { adapter: string }> {
  backend ??= WebGpuBackend.create(navigator.gpu);
  const [be, train, validation] = await Promise.all([backend, textShard(urls.train, cfg.gpt.vocab), textShard(urls.validation, cfg.gpt.vocab)]);
  const result = await runLmConvergence(be, { train, validation }, cfg, (line) => {
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
    tabfleetDistributed: { run: typeof run; runLm: typeof runLm; replicaAgreement: typeof replicaAgreement };
  }
}
window.tabfleetDistributed = { run, runLm, replicaAgreement };
out.textContent = 'ready';
