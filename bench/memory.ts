// `npm run bench -- memory`: what activation recompute buys and costs on WebGPU (Dawn on SwiftShader in
// Node). One GPT, one batch: peak GPU memory (live bytes the runtime counts, parameters and AdamW state
// included) and training-step time with and without recompute. Then a device with WebGPU's default
// buffer limits and a 256 MiB budget: the largest batch one pass holds without recompute and with
// it, each found by running real steps until the runtime refuses one, and what planMemory picks for the
// first batch that does not fit without recompute.
// Then GPT-2 small on the same adapter (memory-gpt2.ts): its step time and peak with recompute, and
// the batch a 4 GiB budget fits.
// Token ids are seeded random bytes: memory and time do not depend on the text.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createModel, createOptimizer, HEADROOM, planMemory, probeMemory, recordTrainStep, type Batch, type GptPreset, type Model } from '@tabfleet/nn';
import { Rng } from '@tabfleet/protocol';
import { dispose } from '@tabfleet/tensor';
import { createNodeGpuBackend } from '@tabfleet/tensor/node';
import { repoRoot } from '@tabfleet/headless';
import { benchCommand, runRecord } from './machine';
import { GPT2_QUICK, GPT2_SMALL, measureGpt2Small } from './memory-gpt2';
import type { BenchOptions } from './run';
import { median } from './stats';

const FULL = { gpt: { kind: 'gpt', vocab: 256, context: 128, width: 128, heads: 4, layers: 4 } as GptPreset, batch: 8, budgetMiB: 256, stepsPerRun: 4 };
const QUICK = { gpt: { kind: 'gpt', vocab: 256, context: 64, width: 64, heads: 2, layers: 2 } as GptPreset, batch: 4, budgetMiB: 48, stepsPerRun: 2 };

function tokens(gpt: GptPreset, size: number, seed: number): Batch {
  const rng = new Rng(seed);
  const n = size * gpt.context;
  return { x: Int32Array.from({ length: n }, () => rng.int(gpt.vocab)), y: Int32Array.from({ length: n }, () => rng.int(gpt.vocab)), size };
}

const mib = (b: number) => b / 2 ** 20;

/** Median ms per AdamW training step over `runs` runs of `steps` steps (one warm-up step first). */
async function stepMs(model: Model, batch: Batch, recompute: boolean, runs: number, steps: number): Promise<{ msPerStep: number; runs: number[] }> {
  model.recompute = recompute;
  const opt = createOptimizer(model.store, { kind: 'adamw', lr: 1e-4 });
  const step = async () => {
    const loss = recordTrainStep(model, opt, batch);
    await loss.data();
    dispose(loss);
  };
  await step();
  const samples: number[] = [];
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    for (let s = 0; s < steps; s++) await step();
    samples.push((performance.now() - t0) / steps);
  }
  model.recompute = false;
  return { msPerStep: median(samples), runs: samples };
}

/** The largest batch whose gradient pass stays within the runtime's budget: doubling, then bisection. */
async function largestBatch(model: Model, gpt: GptPreset, recompute: boolean,
  log: (s: string) => void): Promise<{ batch: number; peakBytes: number; tried: { batch: number; fits: boolean; peakMiB: number }[] }> {
  const tried: { batch: number; fits: boolean; peakMiB: number }[] = [];
  const fits = async (b: number) => {
    const p = (await probeMemory(model, tokens(gpt, b, b), recompute))!;
    const ok = Number.isFinite(p.peakBytes);
    tried.push({ batch: b, fits: ok, peakMiB: mib(p.peakBytes) });
    log(`  recompute ${recompute ? 'on ' : 'off'} batch ${b}: ${ok ? `peak ${mib(p.peakBytes).toFixed(1)} MiB` : 'refused (out of budget)'}`);
    return ok;
  };
  let lo = 0, hi = 1;
  while (await fits(hi)) {
    lo = hi;
    hi *= 2;
    if (hi > 1024) throw new Error('no budget limit reached by batch 1024');
  }
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (await fits(mid)) lo = mid;
    else hi = mid;
  }
  const peakBytes = tried.find((t) => t.batch === lo && t.fits)?.peakMiB ?? NaN;
  return { batch: lo, peakBytes: peakBytes * 2 ** 20, tried };
}

export async function run(opts: BenchOptions): Promise<void> {
  const file = opts.out ?? join(repoRoot, 'bench', 'results', opts.quick ? 'memory.quick.json' : 'memory.json');
  const cfg = opts.quick ? QUICK : FULL;
  const runs = opts.quick ? 2 : opts.runs;
  const log = (s: string) => console.log(`[memory] ${s}`);
  const t0 = Date.now();

  // 1. Same model and batch, recompute off and on.
  const be = await createNodeGpuBackend();
  const model = createModel(cfg.gpt, be, 1);
  const batch = tokens(cfg.gpt, cfg.batch, 7);
  const sameBatch: Record<'off' | 'on', { peakBytes: number; msPerStep: number; runs: number[] }> = {} as never;
  for (const recompute of [false, true]) {
    const probe = (await probeMemory(model, batch, recompute))!;
    const time = await stepMs(model, batch, recompute, runs, cfg.stepsPerRun);
    sameBatch[recompute ? 'on' : 'off'] = { peakBytes: probe.peakBytes, ...time };
    log(`GPT ${JSON.stringify(cfg.gpt)} batch ${cfg.batch}, recompute ${recompute ? 'on' : 'off'}: peak ${mib(probe.peakBytes).toFixed(1)} MiB, ${time.msPerStep.toFixed(0)} ms/step`);
  }

  // 2. WebGPU's default limits and a budget: the largest batch of one pass, without and with recompute.
  const small = await createNodeGpuBackend({ defaultMemoryLimits: true, memoryBudgetBytes: cfg.budgetMiB * 2 ** 20 });
  const smallModel = createModel(cfg.gpt, small, 1);
  log(`device with default limits (binding ${mib(small.adapter.maxStorageBufferBindingSize)} MiB, buffer ${mib(small.adapter.maxBufferSize)} MiB) and a ${cfg.budgetMiB} MiB budget:`);
  const without = await largestBatch(smallModel, cfg.gpt, false, log);
  const withRecompute = await largestBatch(smallModel, cfg.gpt, true, log);
  // The proof: the largest recompute batch, run as a real step without recompute, is refused.
  let refusal = 'ran';
  try {
    smallModel.recompute = false;
    const loss = recordTrainStep(smallModel, createOptimizer(smallModel.store, { kind: 'adamw', lr: 1e-4 }), tokens(cfg.gpt, withRecompute.batch, 3));
    await loss.data();
    dispose(loss);
  } catch (e) {
    refusal = (e as Error).message;
  }
  log(`batch ${withRecompute.batch} without recompute: ${refusal}`);
  // The planner, for the first batch that does not fit without recompute. It fills only HEADROOM of
  // its budget (and measures the size it picks), so it is given the budget whose usable share is the
  // one the batches above were measured against: there the batch fits only with recompute.
  const planBatch = without.batch + 1;
  const plan = await planMemory(smallModel, planBatch, (n) => tokens(cfg.gpt, n, 5), { budgetBytes: (cfg.budgetMiB * 2 ** 20) / HEADROOM, mode: 'auto' });
  log(`planMemory for a job batch of ${planBatch}: micro-batch ${plan.microBatch}, recompute ${plan.recompute} (${plan.reason})`);

  // 3. GPT-2 small (a toy GPT over its vocabulary in the quick run), with recompute.
  const gpt2 = await measureGpt2Small(be, opts.quick ? GPT2_QUICK : GPT2_SMALL, log);

  const report = {
    benchmark: 'memory',
    ...runRecord(t0, benchCommand('memory', opts)),
    quick: opts.quick,
    adapter: be.description,
    gpt: cfg.gpt,
    parameters: model.store.length,
    runs,
    stepsPerRun: cfg.stepsPerRun,
    sameBatch: { batch: cfg.batch, ...sameBatch },
    defaultLimits: {
      budgetBytes: cfg.budgetMiB * 2 ** 20,
      maxStorageBufferBindingSize: small.adapter.maxStorageBufferBindingSize,
      maxBufferSize: small.adapter.maxBufferSize,
      withoutRecompute: without,
      withRecompute,
      largestWithRecomputeRunWithout: refusal,
      plan: {
        batch: planBatch, budgetBytes: plan.budgetBytes, microBatch: plan.microBatch, recompute: plan.recompute, passes: plan.passes, reason: plan.reason,
        predictedPeakBytes: plan.predictedPeakBytes,
      },
    },
    gpt2Small: gpt2,
    summary: {
      /** Peak GPU memory with recompute ÷ without, same model and batch. */
      recompute_peak_memory_ratio: sameBatch.on.peakBytes / sameBatch.off.peakBytes,
      /** Step time with recompute ÷ without (median ms/step). */
      recompute_step_time_ratio: sameBatch.on.msPerStep / sameBatch.off.msPerStep,
      max_batch_without_recompute: without.batch,
      max_batch_with_recompute: withRecompute.batch,
      /** GPT-2 small (quick: the toy GPT), one example, recompute on: one AdamW step's time (ms) and peak GPU memory (MiB) on this adapter. */
      gpt2_small_step_ms: gpt2.stepMs,
      gpt2_small_peak_mib: gpt2.stepPeakBytes / 2 ** 20,
      /** The examples a step fits in 4 GiB: the step's peak plus each further example's bytes (the probes' difference), fitted. */
      gpt2_small_max_batch_4gib_fitted: gpt2.maxBatchFitted,
    },
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  log(`summary ${JSON.stringify(report.summary)}`);
  log(`wrote ${file}`);
}
