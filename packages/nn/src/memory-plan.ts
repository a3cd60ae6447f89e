// Sizing a step to the tab: how many examples one forward/backward pass may hold (the micro-batch,
// accumulated up to the job's batch) and whether the model recomputes activations, from what the
// backend measures on two small probe steps and what the tab allows itself. WebGPU says nothing about
// an adapter's memory, so the budget comes from the tab (settings, navigator.deviceMemory); the
// adapter's binding limit caps the largest single tensor (the logits, attention scores).
import { dispose, GpuOutOfMemoryError } from '@tabfleet/tensor';
import type { Model } from './models/model';
import { recordGradientStep, type Batch } from './train';

export type RecomputeMode = 'auto' | 'on' | 'off';

/** What one gradient pass of `examples` examples needs, measured. */
export interface MemoryProbe {
  examples: number;
  recompute: boolean;
  /** Peak live bytes over the step, parameters and optimizer state included. */
  peakBytes: number;
  /** The largest single tensor of the step. */
  largestBytes: number;
  ms: number;
}

export interface MemoryPlan {
  microBatch: number;
  recompute: boolean;
  /** Micro-batches per step (the job's batch ÷ micro-batch, rounded up). */
  passes: number;
  /** Predicted peak bytes of one pass at this micro-batch. */
  predictedPeakBytes: number;
  /**
   * The most examples one pass of this plan's mode holds within the budget (Infinity where nothing was
   * measured): evaluation's batch, as a forward without gradients holds no more an example than a
   * gradient pass (with recompute on, the GPT's forward keeps one block's activations either way).
   */
  maxExamples: number;
  budgetBytes: number;
  bindingBytes: number;
  reason: string;
  probes: MemoryProbe[];
}

/**
 * The GPU memory a tab allows itself when nobody said: half of `navigator.deviceMemory` (GiB of RAM,
 * which integrated GPUs share; browsers report at most 8), else 2 GiB, and never under 256 MiB.
 */
export function defaultGpuMemoryBytes(deviceMemoryGiB: number | undefined): number {
  const gib = deviceMemoryGiB && Number.isFinite(deviceMemoryGiB) && deviceMemoryGiB > 0 ? deviceMemoryGiB / 2 : 2;
  return Math.max(256 * 2 ** 20, gib * 2 ** 30);
}

/** The share of the budget a plan may fill: the estimate is linear (a line through two probes), and pool buckets round sizes up. */
export const HEADROOM = 0.85;

/** Measures one gradient pass (no optimizer step) of `batch` on the model's backend. */
export async function probeMemory(model: Model, batch: Batch, recompute: boolean): Promise<MemoryProbe | null> {
  const be = model.store.backend;
  if (!be.memory || !be.resetPeakMemory) return null;
  const before = model.recompute;
  if (recompute && before === undefined) throw new Error('this model cannot recompute activations');
  if (before !== undefined) model.recompute = recompute;
  be.resetPeakMemory();
  const t0 = performance.now();
  try {
    const loss = recordGradientStep(model, batch);
    await loss.data();
    dispose(loss);
  } catch (e) {
    if (e instanceof GpuOutOfMemoryError) return { examples: batch.size, recompute, peakBytes: Infinity, largestBytes: Infinity, ms: NaN };
    throw e;
  } finally {
    if (before !== undefined) model.recompute = before;
  }
  const m = be.memory();
  return { examples: batch.size, recompute, peakBytes: m.peakBytes, largestBytes: m.largestBytes, ms: performance.now() - t0 };
}

interface Fit {
  recompute: boolean;
  /** Most examples per pass within the budget and the binding limit. */
  examples: number;
  peakAt: (examples: number) => number;
}

/** Peak and largest tensor as linear in the examples, from probes at 1 and 2 examples. */
function fitOf(one: MemoryProbe, two: MemoryProbe, budget: number, binding: number): Fit {
  if (!Number.isFinite(one.peakBytes)) return { recompute: one.recompute, examples: 0, peakAt: () => Infinity };
  if (!Number.isFinite(two.peakBytes)) return { recompute: one.recompute, examples: 1, peakAt: () => one.peakBytes };
  const perExample = Math.max(two.peakBytes - one.peakBytes, 1);
  const fixed = one.peakBytes - perExample;
  const largestPerExample = Math.max(two.largestBytes / 2, 1);
  const byBudget = Math.floor((budget * HEADROOM - fixed) / perExample);
  const byBinding = Math.floor(binding / largestPerExample);
  return { recompute: one.recompute, examples: Math.max(0, Math.min(byBudget, byBinding)), peakAt: (n) => fixed + n * perExample };
}

/**
 * The fit is a line through probes of 1 and 2 examples, but the pool rounds each buffer up (a power of
 * two below 1 MiB, GpuRuntime.bucket), so a pass of 3, 5 or 6 examples can hold up to about twice what
 * the line says. The size a plan would use (the batch, or the most the line fits) is probed too, and
 * stepped down until a probe fits the budget's usable share.
 */
async function probeOwnSize(model: Model, sample: (n: number) => Batch, fit: Fit, batchSize: number, budget: number, probes: MemoryProbe[]): Promise<void> {
  if (!Number.isFinite(budget)) return;
  let examples = Math.min(fit.examples, batchSize);
  while (examples > 2) {
    const probe = (await probeMemory(model, sample(examples), fit.recompute))!;
    probes.push(probe);
    if (probe.peakBytes <= budget * HEADROOM) {
      const line = fit.peakAt;
      fit.peakAt = (n) => (n === examples ? probe.peakBytes : line(n));
      break;
    }
    // At least one fewer, more when the probe overshot by more (half when it ran out), never under the
    // 2 examples the line passes through exactly.
    const scaled = Number.isFinite(probe.peakBytes) ? Math.floor((examples * budget * HEADROOM) / probe.peakBytes) : Math.floor(examples / 2);
    examples = Math.max(2, Math.min(examples - 1, scaled));
  }
  if (examples < Math.min(fit.examples, batchSize)) fit.examples = examples;
}

/** What the caller estimated from the model's architecture (protocol's estimateMemory), in bytes. */
export interface PlanEstimate {
  /** What a pass without recompute adds per example. */
  perExample: number;
  /** One step of the whole batch in one pass without recompute, parameters and optimizer state included. */
  peakAtBatch: number;
}

/**
 * A batch whose estimated step fills at most this share of the usable budget is probed once, at its
 * own size, instead of at 1 and 2 examples first. Those probes' shapes compile matmul kernels that no
 * step uses again (on SwiftShader about a second each: most of a small model's plan, in every tab that
 * joins). The estimate is within 10% of measured probes for every preset (memory-estimate.test.ts),
 * so a quarter leaves room for an estimate several times off; the one probe still has to fit.
 */
export const ESTIMATE_TRUSTED_SHARE = 0.25;

export interface PlanOptions {
  budgetBytes: number;
  mode: RecomputeMode;
  estimate?: PlanEstimate;
}

/**
 * The plan for a job batch of `batchSize` (`sample(n)` gives n examples to probe with). Policy: the
 * whole batch in one pass without recompute if it fits; else in one pass with recompute (about one
 * more forward of compute); else micro-batches accumulated, without recompute while one example fits,
 * since several passes cost less than recompute's extra forward on every one of them. With an
 * `estimate` that puts the batch far under the budget, one probe of the batch confirms it.
 */
export async function planMemory(model: Model, batchSize: number, sample: (n: number) => Batch, opts: PlanOptions): Promise<MemoryPlan> {
  const be = model.store.backend;
  const binding = be.memory ? bindingLimitOf(model) : Infinity;
  const confirmed = await confirmEstimate(model, batchSize, sample, opts, binding);
  if (confirmed) return confirmed;
  const canRecompute = model.recompute !== undefined;
  const modes = opts.mode === 'off' || !canRecompute ? [false] : opts.mode === 'on' ? [true] : [false, true];
  const probes: MemoryProbe[] = [];
  const fits: Fit[] = [];
  for (const recompute of modes) {
    const one = await probeMemory(model, sample(1), recompute);
    if (!one) return wholeBatch(batchSize, opts.mode === 'on' && canRecompute, 'the backend does not measure memory (CPU): the whole batch in one pass');
    const two = batchSize >= 2 ? await probeMemory(model, sample(2), recompute) : one;
    probes.push(one, ...(two !== one ? [two!] : []));
    const fit = two === one ? { recompute, examples: one.peakBytes <= opts.budgetBytes * HEADROOM ? 1 : 0, peakAt: () => one.peakBytes } : fitOf(one, two!, opts.budgetBytes, binding);
    fits.push(fit);
    await probeOwnSize(model, sample, fit, batchSize, opts.budgetBytes, probes);
    // The policy takes the whole batch without recompute whenever it fits, so recompute's probes could
    // change nothing (GPT-2 small on a CPU adapter: one pass of about five minutes saved).
    if (!recompute && fit.examples >= batchSize) break;
  }
  const plain = fits.find((f) => !f.recompute);
  const recomputed = fits.find((f) => f.recompute);
  const mib = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`;
  const plan = (fit: Fit, reason: string): MemoryPlan => {
    const microBatch = Math.min(batchSize, fit.examples);
    return {
      microBatch,
      recompute: fit.recompute,
      passes: Math.ceil(batchSize / microBatch),
      predictedPeakBytes: fit.peakAt(microBatch),
      maxExamples: fit.examples,
      budgetBytes: opts.budgetBytes,
      bindingBytes: binding,
      reason,
      probes,
    };
  };
  if (plain && plain.examples >= batchSize) return plan(plain, `the batch of ${batchSize} fits in ${mib(opts.budgetBytes)} in one pass`);
  if (recomputed && recomputed.examples >= batchSize) return plan(recomputed, `the batch of ${batchSize} fits in ${mib(opts.budgetBytes)} only with activation recompute`);
  if (plain && plain.examples >= 1) return plan(plain, `${plain.examples} of ${batchSize} examples fit per pass: gradients accumulate over micro-batches`);
  if (recomputed && recomputed.examples >= 1) {
    return plan(recomputed, `with recompute ${recomputed.examples} of ${batchSize} examples fit per pass: gradients accumulate over micro-batches`);
  }
  throw new GpuOutOfMemoryError(`not one example of this model fits this tab's ${mib(opts.budgetBytes)} of GPU memory `
    + `(a pass of one example peaks at ${mib(Math.min(...probes.map((p) => p.peakBytes)))})`);
}

/**
 * The whole batch in one pass without recompute, when the estimate puts it under ESTIMATE_TRUSTED_SHARE
 * of the usable budget and one probe of the batch fits: the line beyond it (evaluation's batches) takes
 * the estimate's bytes an example and, as fitOf does, the largest tensor as growing with the examples.
 * Null: nothing to confirm, or the probe disagreed (the caller probes as without an estimate).
 */
async function confirmEstimate(model: Model, batchSize: number, sample: (n: number) => Batch, opts: PlanOptions, binding: number): Promise<MemoryPlan | null> {
  const { estimate, budgetBytes, mode } = opts;
  const usable = budgetBytes * HEADROOM;
  if (!estimate || mode === 'on' || !Number.isFinite(budgetBytes) || !(estimate.peakAtBatch <= usable * ESTIMATE_TRUSTED_SHARE)) return null;
  const probe = await probeMemory(model, sample(batchSize), false);
  if (!probe || !(probe.peakBytes <= usable) || !(probe.largestBytes <= binding)) return null;
  const perExample = Math.max(estimate.perExample, 1);
  const fixed = probe.peakBytes - batchSize * perExample;
  const largestPerExample = Math.max(probe.largestBytes / batchSize, 1);
  const examples = Math.max(batchSize, Math.min(Math.floor((usable - fixed) / perExample), Math.floor(binding / largestPerExample)));
  return {
    microBatch: batchSize, recompute: false, passes: 1, predictedPeakBytes: probe.peakBytes, maxExamples: examples, budgetBytes, bindingBytes: binding,
    reason: `the batch of ${batchSize} fits in ${(budgetBytes / 2 ** 20).toFixed(0)} MiB in one pass (as estimated; probed at ${batchSize})`, probes: [probe],
  };
}

function wholeBatch(batchSize: number, recompute: boolean, reason: string): MemoryPlan {
  return { microBatch: batchSize, recompute, passes: 1, predictedPeakBytes: NaN, maxExamples: Infinity, budgetBytes: Infinity, bindingBytes: Infinity, reason, probes: [] };
}

function bindingLimitOf(model: Model): number {
  const a = (model.store.backend as { adapter?: { maxStorageBufferBindingSize: number; maxBufferSize: number } }).adapter;
  return a ? Math.min(a.maxStorageBufferBindingSize, a.maxBufferSize) : Infinity;
}
