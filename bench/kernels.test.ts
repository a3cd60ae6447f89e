// `npm run bench -- kernels --quick` end to end (dispatcher, build, headless Chromium, tabfleet and
// TF.js webgpu/webgl/cpu) into a temporary file, then the JSON's shape: every field present, every
// number finite and positive, medians consistent with the raw runs. Speed lives in the JSON, not here.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PRESETS } from '@tabfleet/nn';
import { runBench } from './child';
import { kernelBenchOptions } from './kernels';
import { TFJS_BACKENDS, matmulShapes } from './pages/kernels-types';
import { median } from './stats';
import { missingRecord } from './machine';

const dir = mkdtempSync(join(tmpdir(), 'tabfleet-bench-kernels-'));
after(() => rmSync(dir, { recursive: true, force: true }));

// The report is checked field by field below, so it is read loosely typed.
type Json = Record<string, any>;
const QUICK_BATCH = kernelBenchOptions(1, true).batch;

/** Every number anywhere in the report, with its path. */
function numbers(x: unknown, path: string, out: [string, number][] = []): [string, number][] {
  if (typeof x === 'number') out.push([path, x]);
  else if (Array.isArray(x)) x.forEach((v, i) => numbers(v, `${path}[${i}]`, out));
  else if (x && typeof x === 'object') for (const [k, v] of Object.entries(x)) numbers(v, `${path}.${k}`, out);
  return out;
}

function checkTiming(t: Json, runs: number, where: string): void {
  assert.equal(t.runsMs.length, runs, `${where}: one entry per run`);
  assert.equal(t.medianMs, median(t.runsMs), `${where}: median of the runs`);
  assert.ok(Number.isInteger(t.repsPerRun) && t.repsPerRun >= 1, `${where}: repsPerRun`);
  assert.equal(typeof t.warmupMs, 'number', `${where}: warmupMs`);
}

function checkMatmuls(m: Json, runs: number, where: string): void {
  const expected = matmulShapes(kernelBenchOptions(1, true).squareSize, PRESETS['mlp-fashion'].sizes, QUICK_BATCH);
  assert.deepEqual(Object.keys(m.shapes), expected.map((s) => s.name), `${where}: the square product and the MLP's 5 products`);
  for (const s of expected) {
    const r = m.shapes[s.name];
    for (const k of ['M', 'N', 'K', 'transA', 'transB'] as const) assert.equal(r[k], s[k], `${where} ${s.name}.${k}`);
    checkTiming(r, runs, `${where} ${s.name}`);
    assert.equal(r.flops, 2 * s.M * s.N * s.K);
    assert.ok(Math.abs(r.gflops - r.flops / r.medianMs / 1e6) < 1e-9 * r.gflops, `${where} ${s.name}: gflops from the median time`);
    assert.equal(r.gflopsRuns.length, runs);
  }
  assert.equal(typeof m.mlpMatmulsGflops, 'number');
  assert.equal(typeof m.mlpMatmulsMs, 'number');
}

function checkStep(s: Json, runs: number, where: string): void {
  checkTiming(s, runs, where);
  assert.equal(s.msPerStep, s.medianMs, `${where}: msPerStep is the median`);
  // The GPT's batch is its windows (kernelBenchOptions' gptBatch), the others' the kernels batch.
  assert.equal(s.batch, s.model === 'gpt' ? kernelBenchOptions(1, true).gptBatch : QUICK_BATCH);
  assert.equal(s.stepsTimed, s.repsPerRun * runs, `${where}: steps timed`);
  for (const k of ['lossFirst', 'lossLast', 'warmupSteps']) assert.equal(typeof s[k], 'number', `${where}.${k}`);
}

test('npm run bench -- kernels --quick writes a complete kernels JSON', { timeout: 6 * 60_000 }, async (t) => {
  const out = join(dir, 'kernels.json');
  // One timed run per measurement: this checks the report's shape (its 512³ products dominate the time).
  const code = await runBench(['kernels', '--quick', '--runs', '1', '--out', out], t.signal);
  assert.equal(code, 0, 'the benchmark exits 0');
  const r: Json = JSON.parse(readFileSync(out, 'utf8'));
  assert.deepEqual(missingRecord(r), [], 'the run\'s commit, date, command, machine and duration (runRecord)');
  const runs = r.options.runs;
  assert.equal(r.benchmark, 'kernels');
  assert.equal(r.quick, true);
  assert.ok(Number.isInteger(runs) && runs >= 1);

  assert.ok(r.machine.cpuModel.length > 0);
  for (const k of ['cores', 'memoryBytes']) assert.equal(typeof r.machine[k], 'number', `machine.${k}`);
  assert.match(r.browser.version, /^\d+\./);
  for (const k of ['vendor', 'architecture', 'description']) assert.equal(typeof r.adapter[k], 'string', `adapter.${k}`);
  assert.ok(`${r.adapter.vendor}${r.adapter.architecture}${r.adapter.description}`.length > 0, 'the adapter names itself somehow');

  // tabfleet: the adapter's default variant up front, every forced variant beside it.
  const tab = r.tabfleet;
  assert.ok(Object.keys(tab.variants).length >= 2, 'at least the reg and tiled variants');
  for (const v of ['unrolled', 'tiled']) assert.ok(tab.variants[v], `variant ${v} timed`);
  assert.deepEqual(tab.matmul, tab.variants[tab.matmulVariant].matmul);
  for (const [name, v] of Object.entries<Json>({ default: tab, ...tab.variants })) {
    checkMatmuls(v.matmul, runs, `tabfleet ${name}`);
    for (const m of ['mlp', 'cnn', 'gpt']) {
      checkStep(v[m], runs, `tabfleet ${name} ${m}`);
      assert.equal(v[m].submitsPerStep, 1, `tabfleet ${name} ${m}: a step is one command buffer`);
      assert.equal(v[m].readbacksPerStep, 1, `tabfleet ${name} ${m}: the loss is the only readback`);
      assert.equal(typeof v[m].dispatchesPerStep, 'number');
    }
  }

  assert.match(r.tfjs.version, /^4\.22\./);
  assert.equal(r.tfjs.webgpu.info.adapterArchitecture, r.adapter.architecture, 'TF.js webgpu and tabfleet on the same adapter');
  assert.equal(r.tfjs.webgpu.info.adapterVendor, r.adapter.vendor, 'TF.js webgpu and tabfleet on the same adapter');
  for (const b of TFJS_BACKENDS) {
    const t = r.tfjs[b];
    assert.equal(t.backend, b);
    assert.equal(t.info.backend, b, `TF.js really ran on ${b}`);
    checkMatmuls(t.matmul, runs, `tfjs ${b}`);
    checkStep(t.mlp, runs, `tfjs ${b} mlp`);
    checkStep(t.cnn, runs, `tfjs ${b} cnn`);
    checkStep(t.gpt, runs, `tfjs ${b} gpt`);
  }

  // The square product's keys name its size: 512 in --quick.
  assert.equal(r.options.squareSize, 512);
  for (const k of ['matmul512_vs_tfjs_webgpu', 'mlp_step_vs_tfjs_webgpu', 'mlp_step_vs_tfjs_best', 'cnn_step_vs_tfjs_best', 'gpt_step_vs_tfjs_best', 'tabfleet_gpt_tokens_per_sec']) {
    assert.equal(typeof r.summary[k], 'number', `summary.${k}`);
  }
  const sq = '512x512x512';
  assert.equal(r.summary.matmul512_vs_tfjs_webgpu, tab.matmul.shapes[sq].gflops / r.tfjs.webgpu.matmul.shapes[sq].gflops);
  assert.equal(r.summary.mlp_step_vs_tfjs_webgpu, r.tfjs.webgpu.mlp.msPerStep / tab.mlp.msPerStep);
  const bestMlp = Math.min(...TFJS_BACKENDS.map((b) => r.tfjs[b].mlp.msPerStep));
  const bestCnn = Math.min(...TFJS_BACKENDS.map((b) => r.tfjs[b].cnn.msPerStep));
  assert.equal(r.summary.mlp_step_vs_tfjs_best, bestMlp / tab.mlp.msPerStep);
  assert.equal(r.summary.cnn_step_vs_tfjs_best, bestCnn / tab.cnn.msPerStep);
  const bestGpt = Math.min(...TFJS_BACKENDS.map((b) => r.tfjs[b].gpt.msPerStep));
  assert.equal(r.summary.gpt_step_vs_tfjs_best, bestGpt / tab.gpt.msPerStep);
  const att = r.tabfleet.gptAttention;
  assert.ok(att.composed.msPerStep > 0 && att.fused.msPerStep > 0, 'the GPT step is timed with attention composed and fused');
  assert.equal(r.summary.gpt_fused_attention_speedup, att.composed.msPerStep / att.fused.msPerStep);
  assert.equal(r.summary.tabfleet_gpt_tokens_per_sec, (r.options.gptBatch * r.options.gpt.context * 1000) / tab.gpt.msPerStep);

  const all = numbers(r, 'report');
  assert.ok(all.length > 200, `suspiciously few numbers: ${all.length}`);
  // A warm-up of a small op can read 0: the page's clock ticks in 100 µs without cross-origin isolation.
  const mayBeZero = (key: string) => key.endsWith('.warmupMs');
  const bad = all.filter(([key, v]) => !Number.isFinite(v) || v < 0 || (v === 0 && !mayBeZero(key)));
  assert.deepEqual(bad, [], 'every number is finite and positive (a warm-up at least zero)');
});
