// `npm run bench -- kernels`: tabfleet's WebGPU kernels against TensorFlow.js 4.22 (webgpu, webgl, cpu)
// on the same adapter in one headless Chromium page (bench/pages/kernels.ts), written to
// bench/results/kernels.json with the machine, the adapter, every run and the ratios. Every figure is
// measured in that run.
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, relative } from 'node:path';
import { browserSession, openPage, repoRoot, CHROMIUM_ARGS, CHROMIUM_PATH } from '@tabfleet/headless';
import {
  TFJS_BACKENDS, type KernelBenchOptions, type KernelBenchPageResult, type TabfleetVariantResult, type TfjsBackendName,
} from './pages/kernels-types';
import type { BenchOptions } from './run';
import { benchCommand, runRecord } from './machine';

export function kernelBenchOptions(runs: number, quick: boolean): KernelBenchOptions {
  // The GPT: 4 pre-norm blocks of width 128 over 128 byte tokens (0.8M parameters), 8 windows a step.
  const gpt = quick ? { layers: 1, heads: 2, width: 32, context: 32, vocab: 256 } : { layers: 4, heads: 4, width: 128, context: 128, vocab: 256 };
  // --quick (the test suite) times a 512³ square product: 1024³ at 0.5 GFLOP/s took 30 s of its 60.
  const base = { runs, quick, batch: 128, squareSize: quick ? 512 : 1024, learningRate: 0.01, momentum: 0.9, seed: 1, gpt, gptBatch: quick ? 2 : 8 };
  return quick
    ? { ...base, batch: 32, matmulTargetMs: 100, matmulMaxReps: 10, matmulWarmup: 1, trainSteps: 3, trainRunBudgetMs: 1000, trainWarmupSteps: 1 }
    : { ...base, matmulTargetMs: 500, matmulMaxReps: 100, matmulWarmup: 2, trainSteps: 10, trainRunBudgetMs: 5000, trainWarmupSteps: 3 };
}

export interface KernelsSummary {
  /** tabfleet GFLOP/s ÷ TF.js webgpu GFLOP/s on the square product (>1: tabfleet faster). */
  matmul1024_vs_tfjs_webgpu: number;
  matmul1024_vs_tfjs_best: number;
  /** Over all matmuls of one MLP step (total flops ÷ total time), tabfleet ÷ TF.js webgpu. */
  mlp_matmuls_vs_tfjs_webgpu: number;
  /** TF.js webgpu ms/step ÷ tabfleet ms/step (>1: tabfleet faster). */
  mlp_step_vs_tfjs_webgpu: number;
  /** Fastest TF.js backend's ms/step ÷ tabfleet ms/step. */
  mlp_step_vs_tfjs_best: number;
  cnn_step_vs_tfjs_webgpu: number;
  cnn_step_vs_tfjs_best: number;
  /** The GPT training step (options.gpt), TF.js's time ÷ tabfleet's: the same model in TF.js ops on the same adapter. */
  gpt_step_vs_tfjs_webgpu: number;
  gpt_step_vs_tfjs_best: number;
  tfjs_best_gpt_backend: TfjsBackendName;
  tabfleet_gpt_ms_per_step: number;
  /** Training tokens per second: windows × context ÷ step time. */
  tabfleet_gpt_tokens_per_sec: number;
  /** The GPT step with causal attention composed ÷ fused into one kernel (> 1: fused pays on this adapter). */
  gpt_fused_attention_speedup: number;
  tfjs_best_gpt_tokens_per_sec: number;
  tfjs_best_matmul1024_backend: TfjsBackendName;
  tfjs_best_mlp_backend: TfjsBackendName;
  tfjs_best_cnn_backend: TfjsBackendName;
  tabfleet_matmul1024_gflops: number;
  tabfleet_mlp_ms_per_step: number;
  tabfleet_cnn_ms_per_step: number;
  /** The variant WebGpuBackend picks for this adapter, and how it compares with each other variant (>1: the pick is faster). */
  matmul_variant: {
    chosen: string;
    fastest: { matmul1024: string; mlp_matmuls: string; mlp_step: string; cnn_step: string };
    chosen_vs: Record<string, { matmul1024: number; mlp_matmuls: number; mlp_step: number; cnn_step: number }>;
  };
}

function fastest<K extends string>(entries: [K, number][], higherIsBetter: boolean): K {
  return entries.reduce((best, e) => ((higherIsBetter ? e[1] > best[1] : e[1] < best[1]) ? e : best))[0];
}

export function summarize(r: KernelBenchPageResult): KernelsSummary {
  const sq = `${r.options.squareSize}x${r.options.squareSize}x${r.options.squareSize}`;
  const chosen = r.tabfleet.defaultVariant;
  const tab = r.tabfleet.variants[chosen];
  if (!tab) throw new Error(`the default matmul variant ${chosen} was not timed`);
  const tf = r.tfjs;
  const tfBackends = TFJS_BACKENDS.map((b) => [b, tf[b]] as const);
  const bestMatmul = fastest(tfBackends.map(([b, x]) => [b, x.matmul.shapes[sq].gflops]), true);
  const bestMlp = fastest(tfBackends.map(([b, x]) => [b, x.mlp.msPerStep]), false);
  const bestCnn = fastest(tfBackends.map(([b, x]) => [b, x.cnn.msPerStep]), false);
  const bestGpt = fastest(tfBackends.map(([b, x]) => [b, x.gpt.msPerStep]), false);
  const tokensPerSec = (s: { msPerStep: number }) => (r.options.gptBatch * r.options.gpt.context * 1000) / s.msPerStep;
  const variants = Object.entries(r.tabfleet.variants) as [string, TabfleetVariantResult][];
  const chosenVs: KernelsSummary['matmul_variant']['chosen_vs'] = {};
  for (const [name, v] of variants) {
    if (name === chosen) continue;
    chosenVs[name] = {
      matmul1024: tab.matmul.shapes[sq].gflops / v.matmul.shapes[sq].gflops,
      mlp_matmuls: tab.matmul.mlpMatmulsGflops / v.matmul.mlpMatmulsGflops,
      mlp_step: v.mlp.msPerStep / tab.mlp.msPerStep,
      cnn_step: v.cnn.msPerStep / tab.cnn.msPerStep,
    };
  }
  return {
    matmul1024_vs_tfjs_webgpu: tab.matmul.shapes[sq].gflops / tf.webgpu.matmul.shapes[sq].gflops,
    matmul1024_vs_tfjs_best: tab.matmul.shapes[sq].gflops / tf[bestMatmul].matmul.shapes[sq].gflops,
    mlp_matmuls_vs_tfjs_webgpu: tab.matmul.mlpMatmulsGflops / tf.webgpu.matmul.mlpMatmulsGflops,
    mlp_step_vs_tfjs_webgpu: tf.webgpu.mlp.msPerStep / tab.mlp.msPerStep,
    mlp_step_vs_tfjs_best: tf[bestMlp].mlp.msPerStep / tab.mlp.msPerStep,
    cnn_step_vs_tfjs_webgpu: tf.webgpu.cnn.msPerStep / tab.cnn.msPerStep,
    cnn_step_vs_tfjs_best: tf[bestCnn].cnn.msPerStep / tab.cnn.msPerStep,
    gpt_step_vs_tfjs_webgpu: tf.webgpu.gpt.msPerStep / tab.gpt.msPerStep,
    gpt_step_vs_tfjs_best: tf[bestGpt].gpt.msPerStep / tab.gpt.msPerStep,
    tfjs_best_gpt_backend: bestGpt,
    tabfleet_gpt_ms_per_step: tab.gpt.msPerStep,
    tabfleet_gpt_tokens_per_sec: tokensPerSec(tab.gpt),
    gpt_fused_attention_speedup: r.tabfleet.gptAttention.composed.msPerStep / r.tabfleet.gptAttention.fused.msPerStep,
    tfjs_best_gpt_tokens_per_sec: tokensPerSec(tf[bestGpt].gpt),
    tfjs_best_matmul1024_backend: bestMatmul,
    tfjs_best_mlp_backend: bestMlp,
    tfjs_best_cnn_backend: bestCnn,
    tabfleet_matmul1024_gflops: tab.matmul.shapes[sq].gflops,
    tabfleet_mlp_ms_per_step: tab.mlp.msPerStep,
    tabfleet_cnn_ms_per_step: tab.cnn.msPerStep,
    matmul_variant: {
      chosen,
      fastest: {
        matmul1024: fastest(variants.map(([n, v]) => [n, v.matmul.shapes[sq].gflops]), true),
        mlp_matmuls: fastest(variants.map(([n, v]) => [n, v.matmul.mlpMatmulsGflops]), true),
        mlp_step: fastest(variants.map(([n, v]) => [n, v.mlp.msPerStep]), false),
        cnn_step: fastest(variants.map(([n, v]) => [n, v.cnn.msPerStep]), false),
      },
      chosen_vs: chosenVs,
    },
  };
}

/** The report's summary, its square product's keys named by its size (matmul1024_… in a full run, matmul512_… in --quick). */
function namedBySquareSize(s: KernelsSummary, size: number): Record<string, unknown> {
  return JSON.parse(JSON.stringify(s).replaceAll('matmul1024', `matmul${size}`));
}

function printSummary(s: KernelsSummary, page: KernelBenchPageResult): void {
  const x = (v: number) => `${v.toFixed(2)}×`;
  const sq = `${page.options.squareSize}³`;
  console.log('\n[kernels] summary (ratios > 1: tabfleet faster)');
  console.log(`  matmul ${sq}: tabfleet ${s.tabfleet_matmul1024_gflops.toFixed(2)} GFLOP/s; vs TF.js webgpu ${x(s.matmul1024_vs_tfjs_webgpu)}, vs TF.js best ` +
    `(${s.tfjs_best_matmul1024_backend}) ${x(s.matmul1024_vs_tfjs_best)}`);
  console.log(`  MLP step matmuls: vs TF.js webgpu ${x(s.mlp_matmuls_vs_tfjs_webgpu)}`);
  console.log(`  MLP step: tabfleet ${s.tabfleet_mlp_ms_per_step.toFixed(2)} ms; vs TF.js webgpu ${x(s.mlp_step_vs_tfjs_webgpu)}, vs TF.js best ` +
    `(${s.tfjs_best_mlp_backend}) ${x(s.mlp_step_vs_tfjs_best)}`);
  console.log(`  GPT step: tabfleet ${s.tabfleet_gpt_ms_per_step.toFixed(2)} ms (${s.tabfleet_gpt_tokens_per_sec.toFixed(0)} tokens/s); vs TF.js webgpu ` +
    `${x(s.gpt_step_vs_tfjs_webgpu)}, vs TF.js best (${s.tfjs_best_gpt_backend}, ${s.tfjs_best_gpt_tokens_per_sec.toFixed(0)} tokens/s) ${x(s.gpt_step_vs_tfjs_best)}`);
  console.log(`  GPT causal attention: fused ${x(s.gpt_fused_attention_speedup)} the composed step (default here: ${page.tabfleet.gptAttention.defaultFused ? 'fused' : 'composed'})`);
  console.log(`  CNN step: tabfleet ${s.tabfleet_cnn_ms_per_step.toFixed(2)} ms; vs TF.js webgpu ${x(s.cnn_step_vs_tfjs_webgpu)}, vs TF.js best ` +
    `(${s.tfjs_best_cnn_backend}) ${x(s.cnn_step_vs_tfjs_best)}`);
  const mv = s.matmul_variant;
  console.log(`  matmul variant for this adapter: ${mv.chosen}; fastest: ${sq} ${mv.fastest.matmul1024}, MLP matmuls ${mv.fastest.mlp_matmuls}, MLP step ` +
    `${mv.fastest.mlp_step}, CNN step ${mv.fastest.cnn_step}`);
  for (const [other, r] of Object.entries(mv.chosen_vs)) {
    console.log(`    ${mv.chosen} vs ${other}: ${sq} ${x(r.matmul1024)}, MLP matmuls ${x(r.mlp_matmuls)}, MLP step ${x(r.mlp_step)}, CNN step ${x(r.cnn_step)}`);
  }
}

export async function runKernelsBench(opts: BenchOptions): Promise<{ file: string; report: ReturnType<typeof buildReport> }> {
  const options = kernelBenchOptions(opts.runs, opts.quick);
  const file = opts.out ?? join(repoRoot, 'bench', 'results', opts.quick ? 'kernels.quick.json' : 'kernels.json');
  const t0 = Date.now();
  console.log(`[kernels] ${opts.quick ? 'quick mode, ' : ''}${options.runs} runs per measurement; load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const session = await browserSession();
  try {
    const browserVersion = session.browser.version();
    const { page, errors, close } = await openPage(session.browser, `${session.baseUrl}/bench/pages/kernels.html`, { log: (l) => console.log(l) });
    try {
      await page.waitForFunction(() => typeof window.runKernelBench === 'function');
      const result = await page.evaluate((o) => window.runKernelBench(o), options);
      if (errors.length > 0) throw new Error(`the benchmark page threw:\n${errors.join('\n')}`);
      const summary = summarize(result);
      const report = buildReport(result, summary, browserVersion, runRecord(t0, benchCommand('kernels', opts)));
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
      printSummary(summary, result);
      console.log(`[kernels] wrote ${relative(process.cwd(), file) || file}`);
      return { file, report };
    } finally {
      await close();
    }
  } finally {
    await session.close();
  }
}

function buildReport(r: KernelBenchPageResult, summary: KernelsSummary, browserVersion: string, record: ReturnType<typeof runRecord>) {
  const chosen = r.tabfleet.variants[r.tabfleet.defaultVariant];
  return {
    benchmark: 'kernels',
    ...record,
    quick: r.options.quick,
    options: r.options,
    browser: {
      name: 'chromium',
      version: browserVersion,
      /** How it was started: its flags, or the shared browser's WebSocket endpoint (started elsewhere). */
      launch: process.env.TABFLEET_BROWSER_WS ? { connectedTo: process.env.TABFLEET_BROWSER_WS } : { executable: CHROMIUM_PATH, args: CHROMIUM_ARGS },
      userAgent: r.userAgent,
      hardwareConcurrency: r.hardwareConcurrency,
    },
    adapter: r.adapter,
    tabfleet: {
      matmulVariant: r.tabfleet.defaultVariant,
      matmul: chosen.matmul,
      mlp: chosen.mlp,
      cnn: chosen.cnn,
      gpt: chosen.gpt,
      variants: r.tabfleet.variants,
      gptAttention: r.tabfleet.gptAttention,
    },
    tfjs: { version: r.tfjsVersion, webgpu: r.tfjs.webgpu, webgl: r.tfjs.webgl, cpu: r.tfjs.cpu },
    summary: namedBySquareSize(summary, r.options.squareSize),
    pageMs: r.totalMs,
  };
}

export async function run(opts: BenchOptions): Promise<void> {
  await runKernelsBench(opts);
}
