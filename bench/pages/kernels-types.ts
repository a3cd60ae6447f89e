// What the kernels benchmark page takes and returns; shared by the page (browser) and bench/kernels.ts
// (Node), so it holds types and pure helpers only, no DOM and no Node globals.
import type { AdapterSummary } from '@tabfleet/tensor';

export type TfjsBackendName = 'webgpu' | 'webgl' | 'cpu';
export const TFJS_BACKENDS: readonly TfjsBackendName[] = ['webgpu', 'webgl', 'cpu'];
/** A tabfleet matmul variant name ('unrolled', 'tiled', or whatever packages/tensor adds). */
export type MatmulVariantName = string;
/** Variants always timed; the one the backend picks for the adapter is timed too if it is another. */
export const MATMUL_VARIANTS: readonly MatmulVariantName[] = ['unrolled', 'tiled'];

export interface KernelBenchOptions {
  /** Timed runs per measurement; results report the median and every run. */
  runs: number;
  quick: boolean;
  /** Batch size of the training steps and of the MLP matmul shapes. */
  batch: number;
  /** Side of the square matmul (1024 → 1024×1024×1024). */
  squareSize: number;
  /** A matmul run repeats the product until it takes about this long (bounded by matmulMaxReps). */
  matmulTargetMs: number;
  matmulMaxReps: number;
  /** Untimed calls before timing (compiles shaders, fills pools). */
  matmulWarmup: number;
  /** Steps per timed training run, lowered only when a step is so slow a run would exceed trainRunBudgetMs. */
  trainSteps: number;
  trainRunBudgetMs: number;
  trainWarmupSteps: number;
  learningRate: number;
  momentum: number;
  /** Seed of the synthetic data and of the initial weights. */
  seed: number;
  /** The GPT whose training step is timed (vocabulary of byte tokens), and its batch of windows. */
  gpt: { layers: number; heads: number; width: number; context: number; vocab: number };
  gptBatch: number;
}

/** One product C = op(A)·op(B): A [M,K] (or [K,M] with transA), B [K,N] (or [N,K] with transB). */
export interface MatmulShape {
  name: string;
  /** Where it comes from, e.g. "[128,784]·[256,784]ᵀ → [128,256] (fc0 forward)". */
  desc: string;
  M: number;
  N: number;
  K: number;
  transA: boolean;
  transB: boolean;
}

/** Timings of one repeated piece of work: each run times `repsPerRun` repetitions. */
export interface Timing {
  /** Median over runs of the per-repetition time. */
  medianMs: number;
  /** Per-repetition time of every timed run, in run order. */
  runsMs: number[];
  repsPerRun: number;
  /** Wall time of the last untimed warm-up repetition (it sets repsPerRun). */
  warmupMs: number;
}

export interface MatmulResult extends MatmulShape, Timing {
  flops: number;
  /** 2·M·N·K / medianMs. */
  gflops: number;
  gflopsRuns: number[];
}

export interface MatmulSet {
  /** By shape name: the square product first, then the MLP's forward and backward products. */
  shapes: Record<string, MatmulResult>;
  /** All MLP products of one step: total flops ÷ total median time. */
  mlpMatmulsGflops: number;
  mlpMatmulsMs: number;
}

export interface StepResult extends Timing {
  model: string;
  /** Examples per step (token windows for the GPT). */
  batch: number;
  /** Median ms per training step (forward, backward, SGD-momentum update, loss readback). */
  msPerStep: number;
  stepsTimed: number;
  warmupSteps: number;
  /** Loss of the first (warm-up) step and of the last timed step: finite, and falling on the fixed batches. */
  lossFirst: number;
  lossLast: number;
}

export interface TabfleetStepResult extends StepResult {
  /** Runtime counters over the timed steps, per step: a step should be one submit and one readback. */
  submitsPerStep: number;
  readbacksPerStep: number;
  dispatchesPerStep: number;
}

export interface TabfleetVariantResult {
  variant: MatmulVariantName;
  matmul: MatmulSet;
  mlp: TabfleetStepResult;
  cnn: TabfleetStepResult;
  gpt: TabfleetStepResult;
}

export interface TfjsBackendResult {
  backend: TfjsBackendName;
  /** Backend-specific detail: WebGPU adapter, WebGL renderer. */
  info: Record<string, string>;
  matmul: MatmulSet;
  mlp: StepResult;
  cnn: StepResult;
  gpt: StepResult;
}

/** The adapter as the tensor package summarizes it. */
export type AdapterReport = AdapterSummary;

export interface KernelBenchPageResult {
  options: KernelBenchOptions;
  userAgent: string;
  hardwareConcurrency: number;
  adapter: AdapterReport;
  tfjsVersion: string;
  tabfleet: {
    /** The variant WebGpuBackend picks for this adapter when none is forced. */
    defaultVariant: MatmulVariantName;
    /** Every timed variant, forced with new WebGpuBackend(rt, { matmulVariant }). */
    variants: Record<MatmulVariantName, TabfleetVariantResult>;
    /** The GPT step on the default variant with causal attention composed (matmul, softmax, matmul) and fused (one kernel). */
    gptAttention: { defaultFused: boolean; composed: TabfleetStepResult; fused: TabfleetStepResult };
  };
  tfjs: Record<TfjsBackendName, TfjsBackendResult>;
  /** Wall time of the whole page run. */
  totalMs: number;
}

/** The square product and every product of one MLP training step, derived from its layer sizes. */
export function matmulShapes(squareSize: number, mlpSizes: readonly number[], batch: number): MatmulShape[] {
  const n = squareSize;
  const shapes: MatmulShape[] = [{ name: `${n}x${n}x${n}`, desc: `[${n},${n}]·[${n},${n}] → [${n},${n}]`, M: n, N: n, K: n, transA: false, transB: false }];
  const layers = mlpSizes.length - 1;
  // Forward: linear y = x·Wᵀ with W stored [out, in] (PyTorch layout, as packages/nn does).
  for (let i = 0; i < layers; i++) {
    const inF = mlpSizes[i], outF = mlpSizes[i + 1];
    shapes.push({ name: `mlp.fc${i}.forward`, desc: `[${batch},${inF}]·[${outF},${inF}]ᵀ → [${batch},${outF}]`, M: batch, N: outF, K: inF, transA: false, transB: true });
  }
  // Backward, last layer first: dX = dZ·W (skipped for the input layer, whose input needs no gradient), dW = dZᵀ·X.
  for (let i = layers - 1; i >= 0; i--) {
    const inF = mlpSizes[i], outF = mlpSizes[i + 1];
    if (i > 0) shapes.push({ name: `mlp.fc${i}.grad_input`, desc: `[${batch},${outF}]·[${outF},${inF}] → [${batch},${inF}]`, M: batch, N: inF, K: outF, transA: false, transB: false });
    shapes.push({ name: `mlp.fc${i}.grad_weight`, desc: `[${batch},${outF}]ᵀ·[${batch},${inF}] → [${outF},${inF}]`, M: outF, N: inF, K: batch, transA: true, transB: false });
  }
  return shapes;
}
