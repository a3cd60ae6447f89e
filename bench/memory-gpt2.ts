// The memory benchmark's GPT-2 small part (issue 38): 12 layers, 12 heads, width 768, context 1,024
// over GPT-2's BPE vocabulary, on this machine's adapter, with activation recompute. One gradient
// pass of one example and of two (the probes a tab's planner runs), then one AdamW step of one
// example, timed, whose peak counts the parameters, gradients, AdamW state and activations. The
// largest batch a 4 GiB budget fits is the planner's fit through the two probes (peak linear in the
// examples), with the AdamW state the probes lack added: running batches up to it would take an hour
// a batch on a CPU adapter.
import { createModel, createOptimizer, probeMemory, recordTrainStep, type Batch, type GptPreset } from '@tabfleet/nn';
import { Rng } from '@tabfleet/protocol';
import { dispose, type WebGpuBackend } from '@tabfleet/tensor';

/** GPT-2 small; the quick run keeps its vocabulary and the steps, at a toy depth, width and context. */
export const GPT2_SMALL = { kind: 'gpt', vocab: 50257, context: 1024, width: 768, heads: 12, layers: 12 } as GptPreset;
export const GPT2_QUICK = { kind: 'gpt', vocab: 50257, context: 16, width: 64, heads: 2, layers: 2 } as GptPreset;
export const GPT2_BUDGET_BYTES = 4 * 2 ** 30;

const mib = (b: number) => b / 2 ** 20;

function tokens(gpt: GptPreset, size: number, seed: number): Batch {
  const rng = new Rng(seed);
  const n = size * gpt.context;
  return { x: Int32Array.from({ length: n }, () => rng.int(gpt.vocab)), y: Int32Array.from({ length: n }, () => rng.int(gpt.vocab)), size };
}

export interface Gpt2Report {
  gpt: GptPreset;
  parameters: number;
  /** Peak of a gradient pass (no optimizer state yet), one and two examples, recompute on. */
  probePeakBytes: { one: number; two: number };
  probeMs: { one: number; two: number };
  /** One AdamW step of one example, recompute on: its time (pipelines compiled by the probes) and peak. */
  stepMs: number;
  stepPeakBytes: number;
  loss: number;
  /** Bytes each further example adds (the probes' difference), and the fitted largest batch in the budget. */
  perExampleBytes: number;
  budgetBytes: number;
  maxBatchFitted: number;
}

export async function measureGpt2Small(be: WebGpuBackend, gpt: GptPreset, log: (s: string) => void): Promise<Gpt2Report> {
  const t0 = performance.now();
  const model = createModel(gpt, be, 1);
  log(`GPT-2 small ${JSON.stringify(gpt)}: ${model.store.length.toLocaleString('en-US')} parameters, built in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const probe = async (n: number) => {
    const p = (await probeMemory(model, tokens(gpt, n, n), true))!;
    if (!Number.isFinite(p.peakBytes)) throw new Error(`a gradient pass of ${n} example(s) did not fit the device`);
    log(`  gradient pass of ${n}, recompute on: peak ${mib(p.peakBytes).toFixed(0)} MiB in ${(p.ms / 1000).toFixed(1)} s`);
    return p;
  };
  const one = await probe(1);
  const two = await probe(2);
  model.recompute = true;
  const opt = createOptimizer(model.store, { kind: 'adamw', lr: 1e-4 });
  be.resetPeakMemory();
  const s0 = performance.now();
  const lossTensor = recordTrainStep(model, opt, tokens(gpt, 1, 7));
  const loss = (await lossTensor.data())[0];
  dispose(lossTensor);
  const stepMs = performance.now() - s0;
  const stepPeakBytes = be.memory().peakBytes;
  model.recompute = false;
  log(`  AdamW step of 1, recompute on: ${(stepMs / 1000).toFixed(1)} s, peak ${mib(stepPeakBytes).toFixed(0)} MiB, loss ${loss.toFixed(3)}`);
  // The step's peak is the probe's plus the AdamW state; each further example adds what the second probe added.
  const perExampleBytes = Math.max(two.peakBytes - one.peakBytes, 1);
  const maxBatchFitted = Math.max(0, Math.floor((GPT2_BUDGET_BYTES - stepPeakBytes) / perExampleBytes) + 1);
  log(`  ${mib(perExampleBytes).toFixed(0)} MiB an example more: ${maxBatchFitted} example(s) a step in ${mib(GPT2_BUDGET_BYTES)} MiB`);
  return {
    gpt, parameters: model.store.length, probePeakBytes: { one: one.peakBytes, two: two.peakBytes }, probeMs: { one: one.ms, two: two.ms },
    stepMs, stepPeakBytes, loss, perExampleBytes, budgetBytes: GPT2_BUDGET_BYTES, maxBatchFitted,
  };
}
