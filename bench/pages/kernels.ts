// The kernels benchmark page: on one browser, in one run, times tabfleet's WebGPU kernels (both matmul
// variants) and TensorFlow.js 4.22 (webgpu, webgl, cpu backends) on the same matmuls and the same MLP,
// CNN and GPT training steps with the same synthetic data. bench/kernels.ts drives it through
// window.runKernelBench and writes the JSON; nothing here is a typed-in figure.
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-webgpu';
import { mulberry32 } from '@tabfleet/protocol';
import { WebGpuBackend, type MatmulParams, type Storage, type WebGpuBackendOptions } from '@tabfleet/tensor';
import { createModel, createOptimizer, PRESETS, trainStep, type Batch, type GptPreset, type ModelPreset } from '@tabfleet/nn';
import {
  MATMUL_VARIANTS, TFJS_BACKENDS, matmulShapes,
  type KernelBenchOptions, type KernelBenchPageResult, type MatmulResult, type MatmulSet, type MatmulShape,
  type StepResult, type TabfleetStepResult, type TabfleetVariantResult, type TfjsBackendName, type TfjsBackendResult, type Timing,
} from './kernels-types';
import { median } from '../stats';

const MLP = PRESETS['mlp-fashion'];
const CNN = PRESETS['cnn-fashion'];
const FEATURES = CNN.inChannels * CNN.imageSize * CNN.imageSize; // 784, the MLP's input too
const CLASSES = CNN.classes;
if (MLP.sizes[0] !== FEATURES || MLP.sizes[MLP.sizes.length - 1] !== CLASSES) throw new Error('MLP and CNN presets disagree on input or classes');

const out = document.getElementById('out')!;
let startedAt = performance.now();
function progress(line: string): void {
  line = `+${((performance.now() - startedAt) / 1000).toFixed(1)}s ${line}`;
  console.log(`[kernels] ${line}`);
  out.textContent += `${line}\n`;
}

// ---- deterministic synthetic data ------------------------------------------------------------

function uniform(n: number, rand: () => number, lo = -1, hi = 1): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = lo + (hi - lo) * rand();
  return a;
}

function normal(n: number, rand: () => number, std: number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = std * Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  return a;
}

/** A few batches of pixel-like features in [0, 1) and random labels, cycled through by every trainer. */
function syntheticBatches(batch: number, count: number, seed: number): Batch[] {
  const rand = mulberry32(seed);
  return Array.from({ length: count }, () => ({
    x: uniform(batch * FEATURES, rand, 0, 1),
    y: Int32Array.from({ length: batch }, () => Math.floor(rand() * CLASSES)),
    size: batch,
  }));
}

/** Windows of random byte tokens and next tokens for the GPT (timing only: what it learns does not matter). */
function tokenBatches(o: KernelBenchOptions, count: number): Batch[] {
  const rand = mulberry32(o.seed + 7);
  const n = o.gptBatch * o.gpt.context;
  const ids = () => Int32Array.from({ length: n }, () => Math.floor(rand() * o.gpt.vocab));
  return Array.from({ length: count }, () => ({ x: ids(), y: ids(), size: o.gptBatch }));
}

const gptPreset = (o: KernelBenchOptions): GptPreset => ({ kind: 'gpt', ...o.gpt });

// ---- timing ------------------------------------------------------------------------------------

interface MeasureConfig {
  runs: number;
  warmup: number;
  /** A run repeats the work until about this long... */
  targetMs: number;
  /** ...but at most this many times. */
  maxReps: number;
  /** Called after warm-up, right before the first timed run. */
  beforeTimed?: () => void;
}

/** Warms up, picks repetitions per run from the warm time, then times `runs` runs. */
async function measure(work: (reps: number) => Promise<void>, c: MeasureConfig): Promise<Timing> {
  let warmupMs = 0;
  for (let i = 0; i < Math.max(1, c.warmup); i++) {
    const t0 = performance.now();
    await work(1);
    warmupMs = performance.now() - t0;
  }
  const repsPerRun = Math.max(1, Math.min(c.maxReps, Math.floor(c.targetMs / Math.max(warmupMs, 1e-3))));
  c.beforeTimed?.();
  const runsMs: number[] = [];
  for (let r = 0; r < c.runs; r++) {
    const t0 = performance.now();
    await work(repsPerRun);
    runsMs.push((performance.now() - t0) / repsPerRun);
  }
  return { medianMs: median(runsMs), runsMs, repsPerRun, warmupMs };
}

function matmulResult(s: MatmulShape, t: Timing): MatmulResult {
  const flops = 2 * s.M * s.N * s.K;
  return { ...s, ...t, flops, gflops: flops / t.medianMs / 1e6, gflopsRuns: t.runsMs.map((ms) => flops / ms / 1e6) };
}

function matmulSet(results: MatmulResult[]): MatmulSet {
  const mlp = results.filter((r) => r.name.startsWith('mlp.'));
  const flops = mlp.reduce((s, r) => s + r.flops, 0);
  const ms = mlp.reduce((s, r) => s + r.medianMs, 0);
  return { shapes: Object.fromEntries(results.map((r) => [r.name, r])), mlpMatmulsGflops: flops / ms / 1e6, mlpMatmulsMs: ms };
}

function operands(s: MatmulShape, rand: () => number): { a: Float32Array; aShape: [number, number]; b: Float32Array; bShape: [number, number] } {
  return {
    a: uniform(s.M * s.K, rand), aShape: s.transA ? [s.K, s.M] : [s.M, s.K],
    b: uniform(s.K * s.N, rand), bShape: s.transB ? [s.N, s.K] : [s.K, s.N],
  };
}

function matmulConfig(o: KernelBenchOptions): MeasureConfig {
  return { runs: o.runs, warmup: o.matmulWarmup, targetMs: o.matmulTargetMs, maxReps: o.matmulMaxReps };
}

function trainConfig(o: KernelBenchOptions, beforeTimed?: () => void): MeasureConfig {
  return { runs: o.runs, warmup: o.trainWarmupSteps, targetMs: o.trainRunBudgetMs, maxReps: o.trainSteps, beforeTimed };
}

function stepResult(model: string, o: KernelBenchOptions, t: Timing, losses: number[]): StepResult {
  if (!losses.every(Number.isFinite)) throw new Error(`${model}: non-finite loss during the benchmark`);
  return {
    ...t, model, batch: o.batch, msPerStep: t.medianMs, stepsTimed: t.repsPerRun * o.runs,
    warmupSteps: Math.max(1, o.trainWarmupSteps), lossFirst: losses[0], lossLast: losses[losses.length - 1],
  };
}

const fmt = (x: number, d = 2) => x.toFixed(d);

// ---- tabfleet ----------------------------------------------------------------------------------

async function tabfleetMatmuls(be: WebGpuBackend, shapes: MatmulShape[], o: KernelBenchOptions, tag: string): Promise<MatmulSet> {
  const rand = mulberry32(o.seed + 101);
  const results: MatmulResult[] = [];
  for (const s of shapes) {
    const { a, b } = operands(s, rand);
    const A = be.upload(a), B = be.upload(b);
    const p: MatmulParams = { M: s.M, N: s.N, K: s.K, batch: 1, transA: s.transA, transB: s.transB, strideA: 0, strideB: 0, activation: 'none' };
    // Products recorded back to back into one command buffer; reading the last one forces completion.
    const t = await measure(async (reps) => {
      let c: Storage | null = null;
      for (let i = 0; i < reps; i++) {
        if (c) be.release(c);
        c = be.matmul(A, B, null, p);
      }
      await be.read(c!, 'f32');
      be.release(c!);
    }, matmulConfig(o));
    be.release(A);
    be.release(B);
    const r = matmulResult(s, t);
    progress(`${tag} matmul ${s.name} ${s.desc}: ${fmt(r.gflops)} GFLOP/s (${fmt(r.medianMs, 3)} ms, ${r.repsPerRun} reps/run)`);
    results.push(r);
  }
  return matmulSet(results);
}

async function tabfleetTrain(be: WebGpuBackend, name: string, preset: ModelPreset, batches: Batch[], o: KernelBenchOptions, tag: string): Promise<TabfleetStepResult> {
  const model = createModel(preset, be, o.seed);
  const opt = createOptimizer(model.store, { kind: 'sgd', lr: o.learningRate, momentum: o.momentum });
  const losses: number[] = [];
  let k = 0;
  const c = be.rt.counters;
  let before = { ...c };
  const t = await measure(async (reps) => {
    // trainStep = recordTrainStep (forward, backward, update in one command buffer) + the loss readback.
    for (let i = 0; i < reps; i++) losses.push(await trainStep(model, opt, batches[k++ % batches.length]));
  }, trainConfig(o, () => { before = { ...c }; }));
  const steps = t.repsPerRun * o.runs;
  const r: TabfleetStepResult = {
    ...stepResult(name, o, t, losses),
    submitsPerStep: (c.submits - before.submits) / steps,
    readbacksPerStep: (c.readbacks - before.readbacks) / steps,
    dispatchesPerStep: (c.dispatches - before.dispatches) / steps,
  };
  progress(`${tag} ${name} step: ${fmt(r.msPerStep)} ms (${r.repsPerRun} steps/run, ${fmt(r.dispatchesPerStep, 0)} dispatches, ${fmt(r.submitsPerStep)} submits/step, ` +
    `loss ${fmt(r.lossFirst, 3)} → ${fmt(r.lossLast, 3)})`);
  return r;
}

// ---- TensorFlow.js -----------------------------------------------------------------------------

interface TfModel {
  vars: tf.Variable[];
  forward(x: tf.Tensor): tf.Tensor2D;
  inputShape: number[];
  inputDType: 'float32' | 'int32';
  /** Logit columns (one-hot width of the labels). */
  classes: number;
  /** Tensors it holds that are not trained (disposed with the variables). */
  constants?: tf.Tensor[];
}

function tfVar(data: Float32Array, shape: number[]): tf.Variable {
  const init = tf.tensor(data, shape);
  const v = tf.variable(init);
  init.dispose(); // the variable holds its own reference to the data
  return v;
}

/** MLP 784-256-10: fused linear+bias+ReLU layers, linear output; weights [in, out] (TF.js layout). */
function tfMlp(sizes: readonly number[], batch: number, seed: number): TfModel {
  const rand = mulberry32(seed);
  const layers = sizes.slice(1).map((outF, i) => ({
    w: tfVar(normal(sizes[i] * outF, rand, Math.sqrt(2 / sizes[i])), [sizes[i], outF]),
    b: tfVar(new Float32Array(outF), [outF]),
  }));
  return {
    vars: layers.flatMap((l) => [l.w, l.b]),
    inputShape: [batch, sizes[0]], inputDType: 'float32', classes: sizes[sizes.length - 1],
    forward(x) {
      let h = x as tf.Tensor2D;
      layers.forEach((l, i) => {
        h = tf.fused.matMul({ a: h, b: l.w as tf.Tensor2D, bias: l.b, activation: i < layers.length - 1 ? 'relu' : 'linear' }) as tf.Tensor2D;
      });
      return h;
    },
  };
}

/** The same CNN as packages/nn: [conv3×3 pad 1 + bias + ReLU → maxpool 2] × 2 → fc+ReLU → fc; NHWC. */
function tfCnn(p: typeof CNN, batch: number, seed: number): TfModel {
  const rand = mulberry32(seed);
  const [c1, c2] = p.channels;
  const side = Math.floor(Math.floor(p.imageSize / 2) / 2);
  const flat = c2 * side * side;
  const conv = (inC: number, outC: number) => ({
    w: tfVar(normal(9 * inC * outC, rand, Math.sqrt(2 / (9 * inC))), [3, 3, inC, outC]),
    b: tfVar(new Float32Array(outC), [outC]),
  });
  const k1 = conv(p.inChannels, c1), k2 = conv(c1, c2);
  const f1 = { w: tfVar(normal(flat * p.hidden, rand, Math.sqrt(2 / flat)), [flat, p.hidden]), b: tfVar(new Float32Array(p.hidden), [p.hidden]) };
  const f2 = { w: tfVar(normal(p.hidden * p.classes, rand, Math.sqrt(1 / p.hidden)), [p.hidden, p.classes]), b: tfVar(new Float32Array(p.classes), [p.classes]) };
  return {
    vars: [k1.w, k1.b, k2.w, k2.b, f1.w, f1.b, f2.w, f2.b],
    inputShape: [batch, p.imageSize, p.imageSize, p.inChannels], inputDType: 'float32', classes: p.classes,
    forward(x) {
      const B = x.shape[0];
      let h = x as tf.Tensor4D;
      h = tf.maxPool(tf.fused.conv2d({ x: h, filter: k1.w as tf.Tensor4D, strides: 1, pad: 'same', bias: k1.b, activation: 'relu' }), 2, 2, 'valid');
      h = tf.maxPool(tf.fused.conv2d({ x: h, filter: k2.w as tf.Tensor4D, strides: 1, pad: 'same', bias: k2.b, activation: 'relu' }), 2, 2, 'valid');
      const z = tf.fused.matMul({ a: h.reshape([B, flat]), b: f1.w as tf.Tensor2D, bias: f1.b, activation: 'relu' });
      return tf.fused.matMul({ a: z, b: f2.w as tf.Tensor2D, bias: f2.b }) as tf.Tensor2D;
    },
  };
}

/**
 * The same GPT as packages/nn (nanoGPT's pre-norm blocks, causal attention, tanh GELU, head tied to the
 * token embedding) in TF.js ops: gather, moments, batched matMul, softmax with a causal mask.
 * ids [B, T] → logits [B·T, vocab]. Weights are [in, out] (TF.js layout), initialised N(0, 0.02).
 */
function tfGpt(g: KernelBenchOptions['gpt'], batch: number, seed: number): TfModel {
  const rand = mulberry32(seed);
  const { width: W, heads: H, context: T, vocab: V } = g;
  const Dh = W / H;
  const w = (inF: number, outF: number) => tfVar(normal(inF * outF, rand, 0.02), [inF, outF]);
  const zeros = (n: number) => tfVar(new Float32Array(n), [n]);
  const ones = (n: number) => tfVar(new Float32Array(n).fill(1), [n]);
  const ln = () => ({ g: ones(W), b: zeros(W) });
  const wte = tfVar(normal(V * W, rand, 0.02), [V, W]), wpe = tfVar(normal(T * W, rand, 0.02), [T, W]);
  const blocks = Array.from({ length: g.layers }, () => ({
    ln1: ln(), attn: { w: w(W, 3 * W), b: zeros(3 * W) }, proj: { w: w(W, W), b: zeros(W) },
    ln2: ln(), fc: { w: w(W, 4 * W), b: zeros(4 * W) }, out: { w: w(4 * W, W), b: zeros(W) },
  }));
  const lnF = ln();
  // -1e9 above the diagonal: row t attends to columns ≤ t.
  const mask = tf.tidy(() => tf.mul(tf.sub(1, tf.linalg.bandPart(tf.ones([T, T]), -1, 0)), -1e9));
  const norm = (x: tf.Tensor2D, p: { g: tf.Variable; b: tf.Variable }) => {
    const { mean, variance } = tf.moments(x, -1, true);
    return tf.add(tf.mul(tf.mul(tf.sub(x, mean), tf.rsqrt(tf.add(variance, 1e-5))), p.g), p.b) as tf.Tensor2D;
  };
  const linear = (x: tf.Tensor2D, p: { w: tf.Variable; b: tf.Variable }) => tf.fused.matMul({ a: x, b: p.w as tf.Tensor2D, bias: p.b }) as tf.Tensor2D;
  const gelu = (x: tf.Tensor) => tf.mul(tf.mul(x, 0.5), tf.add(1, tf.tanh(tf.mul(Math.sqrt(2 / Math.PI), tf.add(x, tf.mul(0.044715, tf.pow(x, 3)))))));
  return {
    vars: [wte, wpe, ...blocks.flatMap((b) => [b.ln1.g, b.ln1.b, b.attn.w, b.attn.b, b.proj.w, b.proj.b, b.ln2.g, b.ln2.b, b.fc.w, b.fc.b, b.out.w, b.out.b]), lnF.g, lnF.b],
    inputShape: [batch, T], inputDType: 'int32', classes: V, constants: [mask],
    forward(ids) {
      const B = ids.shape[0];
      let x = tf.add(tf.gather(wte, ids), wpe).reshape([B * T, W]) as tf.Tensor2D;
      for (const b of blocks) {
        // [B·T, 3W] → [B, T, 3, H, Dh] → [3, B, H, T, Dh]
        const qkv = tf.transpose(linear(norm(x, b.ln1), b.attn).reshape([B, T, 3, H, Dh]), [2, 0, 3, 1, 4]);
        const [q, k, v] = tf.unstack(qkv);
        const att = tf.softmax(tf.add(tf.mul(tf.matMul(q, k, false, true), 1 / Math.sqrt(Dh)), mask));
        const y = tf.transpose(tf.matMul(att, v), [0, 2, 1, 3]).reshape([B * T, W]) as tf.Tensor2D;
        x = tf.add(x, linear(y, b.proj));
        x = tf.add(x, linear(gelu(linear(norm(x, b.ln2), b.fc)) as tf.Tensor2D, b.out));
      }
      return tf.matMul(norm(x, lnF), wte, false, true) as tf.Tensor2D;
    },
  };
}

async function tfjsMatmuls(shapes: MatmulShape[], o: KernelBenchOptions, tag: string): Promise<MatmulSet> {
  const rand = mulberry32(o.seed + 101);
  const results: MatmulResult[] = [];
  for (const s of shapes) {
    const { a, aShape, b, bShape } = operands(s, rand);
    const A = tf.tensor2d(a, aShape), B = tf.tensor2d(b, bShape);
    const t = await measure(async (reps) => {
      let c: tf.Tensor | null = null;
      for (let i = 0; i < reps; i++) {
        c?.dispose();
        c = tf.matMul(A, B, s.transA, s.transB);
      }
      await c!.data();
      c!.dispose();
    }, matmulConfig(o));
    tf.dispose([A, B]);
    const r = matmulResult(s, t);
    progress(`${tag} matmul ${s.name}: ${fmt(r.gflops)} GFLOP/s (${fmt(r.medianMs, 3)} ms, ${r.repsPerRun} reps/run)`);
    results.push(r);
  }
  return matmulSet(results);
}

async function tfjsTrain(name: string, model: TfModel, batches: Batch[], o: KernelBenchOptions, tag: string): Promise<StepResult> {
  const optimizer = tf.train.momentum(o.learningRate, o.momentum);
  const losses: number[] = [];
  let k = 0;
  const t = await measure(async (reps) => {
    for (let i = 0; i < reps; i++) {
      const b = batches[k++ % batches.length];
      const loss = tf.tidy(() => {
        const x = tf.tensor(b.x, model.inputShape, model.inputDType);
        const y = tf.oneHot(tf.tensor1d(b.y, 'int32'), model.classes);
        return optimizer.minimize(() => tf.losses.softmaxCrossEntropy(y, model.forward(x)) as tf.Scalar, true, model.vars)!;
      });
      losses.push((await loss.data())[0]);
      loss.dispose();
    }
  }, trainConfig(o));
  optimizer.dispose();
  // TF.js 4.22's MomentumOptimizer.dispose() forgets the learning-rate scalar its SGD base keeps.
  (optimizer as unknown as { c?: tf.Tensor }).c?.dispose();
  tf.dispose([...model.vars, ...(model.constants ?? [])]);
  const r = stepResult(name, o, t, losses);
  progress(`${tag} ${name} step: ${fmt(r.msPerStep)} ms (${r.repsPerRun} steps/run, loss ${fmt(r.lossFirst, 3)} → ${fmt(r.lossLast, 3)})`);
  return r;
}

function tfjsInfo(name: TfjsBackendName): Record<string, string> {
  const info: Record<string, string> = { backend: tf.getBackend() };
  if (name === 'webgpu') {
    const a = (tf.backend() as unknown as { adapterInfo?: { vendor?: string; architecture?: string } }).adapterInfo;
    info.adapterVendor = a?.vendor ?? '';
    info.adapterArchitecture = a?.architecture ?? '';
  } else if (name === 'webgl') {
    const gl = (tf.backend() as unknown as { gpgpu?: { gl?: WebGLRenderingContext } }).gpgpu?.gl;
    const ext = gl?.getExtension('WEBGL_debug_renderer_info');
    info.renderer = gl ? String(gl.getParameter(ext ? ext.UNMASKED_RENDERER_WEBGL : gl.RENDERER)) : '';
    info.webglVersion = String(tf.env().get('WEBGL_VERSION'));
  }
  return info;
}

async function tfjsBackend(name: TfjsBackendName, shapes: MatmulShape[], batches: Batch[], tokens: Batch[], o: KernelBenchOptions): Promise<TfjsBackendResult> {
  if (!(await tf.setBackend(name))) throw new Error(`TF.js backend ${name} could not be initialised in this browser`);
  await tf.ready();
  if (tf.getBackend() !== name) throw new Error(`TF.js is on ${tf.getBackend()} after setBackend('${name}')`);
  const tag = `tfjs ${name}`;
  progress(`${tag}: backend ready`);
  const before = tf.memory().numTensors;
  const matmul = await tfjsMatmuls(shapes, o, tag);
  const mlp = await tfjsTrain('mlp-fashion', tfMlp(MLP.sizes, o.batch, o.seed), batches, o, tag);
  const cnn = await tfjsTrain('cnn-fashion', tfCnn(CNN, o.batch, o.seed), batches, o, tag);
  const gpt = await tfjsTrain('gpt', tfGpt(o.gpt, o.gptBatch, o.seed), tokens, { ...o, batch: o.gptBatch }, tag);
  const leaked = tf.memory().numTensors - before;
  if (leaked > 0) progress(`${tag}: warning: ${leaked} tensors left allocated`);
  return { backend: name, info: tfjsInfo(name), matmul, mlp, cnn, gpt };
}

// ---- the run -----------------------------------------------------------------------------------

async function runKernelBench(o: KernelBenchOptions): Promise<KernelBenchPageResult> {
  const t0 = (startedAt = performance.now());
  out.textContent = '';
  const shapes = matmulShapes(o.squareSize, MLP.sizes, o.batch);
  const batches = syntheticBatches(o.batch, 4, o.seed);
  const tokens = tokenBatches(o, 4);

  // tabfleet: one device; a backend per forced matmul variant on the same runtime.
  const auto = await WebGpuBackend.create(navigator.gpu);
  const a = auto.adapter;
  progress(`adapter: ${auto.description}; default matmul variant ${auto.matmulVariant}`);
  const variants: Record<string, TabfleetVariantResult> = {};
  for (const v of new Set([...MATMUL_VARIANTS, auto.matmulVariant])) {
    const be = new WebGpuBackend(auto.rt, { matmulVariant: v as NonNullable<WebGpuBackendOptions['matmulVariant']> });
    const tag = `tabfleet ${v}`;
    const matmul = await tabfleetMatmuls(be, shapes, o, tag);
    const mlp = await tabfleetTrain(be, 'mlp-fashion', MLP, batches, o, tag);
    const cnn = await tabfleetTrain(be, 'cnn-fashion', CNN, batches, o, tag);
    const gpt = await tabfleetTrain(be, 'gpt', gptPreset(o), tokens, { ...o, batch: o.gptBatch }, tag);
    variants[v] = { variant: v, matmul, mlp, cnn, gpt };
  }
  // Causal attention both ways on the default matmul variant: what `fusedAttention` defaults to per adapter.
  const attention = async (fused: boolean) =>
    tabfleetTrain(new WebGpuBackend(auto.rt, { fusedAttention: fused }), 'gpt', gptPreset(o), tokens, { ...o, batch: o.gptBatch }, `tabfleet attention ${fused ? 'fused' : 'composed'}`);
  const gptAttention = { defaultFused: auto.fusedAttention, composed: await attention(false), fused: await attention(true) };
  auto.rt.device.destroy();

  const tfjs = {} as Record<TfjsBackendName, TfjsBackendResult>;
  for (const name of TFJS_BACKENDS) tfjs[name] = await tfjsBackend(name, shapes, batches, tokens, o);

  const totalMs = performance.now() - t0;
  progress(`done in ${fmt(totalMs / 1000, 1)} s`);
  return {
    options: o,
    userAgent: navigator.userAgent,
    hardwareConcurrency: navigator.hardwareConcurrency,
    adapter: {
      vendor: a.vendor, architecture: a.architecture, device: a.device, description: a.description,
      isCpu: a.isCpu, features: a.features, maxStorageBufferBindingSize: a.maxStorageBufferBindingSize, maxBufferSize: a.maxBufferSize,
    },
    tfjsVersion: tf.version.tfjs,
    tabfleet: { defaultVariant: auto.matmulVariant, variants, gptAttention },
    tfjs,
    totalMs,
  };
}

declare global {
  interface Window {
    runKernelBench: typeof runKernelBench;
  }
}
window.runKernelBench = runKernelBench;
