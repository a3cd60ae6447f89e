// What a job's model needs in a tab's GPU memory, from its architecture alone (the dashboard's job
// form; no GPU code here): the parameters, the gradients, the inner optimizer's state, and what a
// gradient pass adds per example with and without activation recompute. The pass is replayed tensor
// by tensor as packages/nn's models and packages/tensor's ops make them, so its peak is the one the
// WebGPU runtime counts and a tab's planner probes (nn's memory-plan.ts, probeMemory); nn's
// memory-estimate.test.ts checks these figures against measured peaks.
//
// What the replay rests on:
// - A gradient pass is one `tidy` scope (nn's train.ts, recordWholeBatch), and a scope frees what was
//   made in it only when it ends: every tensor the forward and the backward make stays live to the
//   end of the pass. The peak is their sum, plus scratch a kernel frees within its own op.
// - Backward (tensor's autograd.ts) makes each gradient as a new tensor and keeps it; a tensor read by
//   two ops gets the sum of its two gradients as one more. A parameter's gradient is a tensor of its
//   own too, copied into the flat gradient buffer when backward ends.
// - Activation recompute (autograd.ts's checkpoint, the GPT's blocks) runs a block's forward in a scope
//   that keeps only the block's output; backward runs the block again, with its backward, in a scope
//   that frees all but the gradients the block returns. So one block's activations are live at a time.
// - The WebGPU runtime (tensor's webgpu/runtime.ts, GpuRuntime.bucket) hands out pooled buffers: a
//   power of two bytes, 256 at least, up to 1 MiB; past that a multiple of a sixteenth of the next
//   power of two. A tensor whose pooled size would pass the adapter's largest storage binding gets
//   its own size (rounded to 16 bytes). `rounding: 'f32'` gives plain 4 bytes a value.
import { INNER_OPTIMIZERS, type InnerOptimizer } from './jobs';
import { architectureLayout, cnnSides, type ModelArchitecture } from './layout';
import { architectureOf, type ModelRef } from './models';

export interface MemoryOptions {
  /** The inner optimizer whose state the tab holds; null: a gradient pass alone (as the planner's probes). */
  optimizer: InnerOptimizer | null;
  /** Examples in one pass (the job's batch, or a micro-batch of it). */
  batchSize: number;
  /** 'webgpu' (default): sizes as the WebGPU runtime's buffer pool rounds them; 'f32': 4 bytes a value. */
  rounding?: 'webgpu' | 'f32';
  /** The adapter's largest storage binding (min of maxStorageBufferBindingSize and maxBufferSize); default unbounded. */
  bindingLimitBytes?: number;
  /**
   * The CNN's convolution kernels (tensor's WebGpuBackend.convVariant): 'direct' on GPUs (the default),
   * 'gemm' (im2col + matmul, with scratch buffers) on CPU adapters such as SwiftShader.
   */
  conv?: 'direct' | 'gemm';
}

/** Bytes; a `recompute` figure is null where the model cannot recompute activations (all but the GPT). */
export interface MemoryEstimate {
  architecture: ModelArchitecture;
  optimizer: InnerOptimizer | null;
  rounding: 'webgpu' | 'f32';
  /** The flat f32 parameter vector (alignment padding included). */
  parameters: number;
  /**
   * The flat gradient buffer, and the gradient tensors backward makes for the parameters (one each; the
   * GPT's tied embedding three: the head's, the lookup's and their sum), held until the pass ends.
   */
  gradients: number;
  /** SGD's velocity, AdamW's two moments, LAMB's two moments and update buffer (and its per-tensor norms). */
  optimizerState: number;
  /** What each further example adds to a pass's peak: its peak at 2 examples less its peak at 1, as the planner probes it. */
  perExample: { recompute: number | null; plain: number };
  /** What a step needs whatever its batch: the peak at 1 example less one example's share (parameters, gradients and state included). */
  fixed: { recompute: number | null; plain: number };
  /** Peak of one step of `examples` in one pass: parameters, gradient buffer, optimizer state and the pass (the update itself is one in-place kernel). */
  batch: { examples: number; recompute: number | null; plain: number };
}

/** The memory a job's model needs, for the job's inner optimizer and batch. */
export function estimateJobMemory(
  spec: Exclude<ModelRef, string> & { hyperparameters: { optimizer: InnerOptimizer; batchSize: number } },
  opts: Omit<MemoryOptions, 'optimizer' | 'batchSize'> = {},
): MemoryEstimate {
  return estimateMemory(architectureOf(spec), { ...opts, optimizer: spec.hyperparameters.optimizer, batchSize: spec.hyperparameters.batchSize });
}

/** The memory a model of this architecture needs for one training step (see MemoryEstimate). */
export function estimateMemory(arch: ModelArchitecture, opts: MemoryOptions): MemoryEstimate {
  checkArchitecture(arch);
  const { optimizer, batchSize } = opts;
  if (!(Number.isInteger(batchSize) && batchSize >= 1)) throw new Error(`batch size ${batchSize}: need a positive integer`);
  if (optimizer !== null && !(INNER_OPTIMIZERS as readonly string[]).includes(optimizer)) throw new Error(`unknown optimizer ${JSON.stringify(optimizer)}: one of ${INNER_OPTIMIZERS.join(', ')}`);
  const rounding = opts.rounding ?? 'webgpu';
  if (rounding !== 'webgpu' && rounding !== 'f32') throw new Error(`unknown rounding ${JSON.stringify(rounding)}: webgpu or f32`);
  const limit = opts.bindingLimitBytes ?? Infinity;
  if (!(limit > 0)) throw new Error(`binding limit ${limit}: need a positive number of bytes`);
  const conv = opts.conv ?? 'direct';
  if (conv !== 'direct' && conv !== 'gemm') throw new Error(`unknown conv variant ${JSON.stringify(conv)}: direct or gemm`);
  const size = rounding === 'f32' ? (n: number) => 4 * n : (n: number) => pooledBytes(n, limit);

  const layout = architectureLayout(arch);
  const parameters = size(layout.length);
  const flatGradients = size(layout.length);
  const optimizerState = optimizer === 'sgd' ? size(layout.length) // velocity (optim.ts makes it even at momentum 0)
    : optimizer === 'adamw' ? 2 * size(layout.length) // first and second moments
    // moments, the update before its trust ratio, and i32 [offset, size] and f32 [‖w‖, ‖u‖] per tensor
    : optimizer === 'lamb' ? 3 * size(layout.length) + 2 * size(2 * layout.entries.length)
    : 0;
  const buffers = parameters + flatGradients + optimizerState;
  const pass = (examples: number, recompute: boolean) => {
    const tape = new Tape(size);
    gradientPass(tape, arch, examples, recompute, conv);
    return tape;
  };
  const figures = (recompute: boolean) => {
    const one = pass(1, recompute), two = pass(2, recompute).peak;
    const perExample = two - one.peak;
    const batch = batchSize === 1 ? one.peak : batchSize === 2 ? two : pass(batchSize, recompute).peak;
    return { perExample, fixed: buffers + one.peak - perExample, batch: buffers + batch, gradientBytes: one.gradientBytes };
  };
  const plain = figures(false);
  // Only the GPT checkpoints its blocks (nn's Model.recompute); the other models always keep everything.
  const recomputed = arch.kind === 'gpt' ? figures(true) : null;
  return {
    architecture: arch,
    optimizer,
    rounding,
    parameters,
    gradients: flatGradients + plain.gradientBytes,
    optimizerState,
    perExample: { recompute: recomputed?.perExample ?? null, plain: plain.perExample },
    fixed: { recompute: recomputed?.fixed ?? null, plain: plain.fixed },
    batch: { examples: batchSize, recompute: recomputed?.batch ?? null, plain: plain.batch },
  };
}

/**
 * Bytes the WebGPU runtime's pool gives a tensor of `elements` 4-byte values (runtime.ts's bucket and
 * alloc): the next power of two, at least 256, up to 1 MiB; past that, with p the next power of two,
 * a multiple of p/16 (eight sizes an octave). Where that passes the binding limit: its own size,
 * rounded to 16 bytes.
 */
export function pooledBytes(elements: number, bindingLimitBytes = Infinity): number {
  const bytes = elements * 4;
  const exact = Math.max(16, Math.ceil(bytes / 16) * 16);
  const pow = 2 ** Math.ceil(Math.log2(Math.max(bytes, 4)));
  const step = pow / 2 / 8;
  const bucket = pow <= 2 ** 20 ? Math.max(256, pow) : Math.ceil(bytes / step) * step;
  return bucket > bindingLimitBytes && exact <= bindingLimitBytes ? exact : bucket;
}

/** Live bytes over a replayed pass: tensors kept to the end of their scope, and scratch freed within an op. */
class Tape {
  peak = 0;
  /** Bytes of the parameters' own gradient tensors (and the tied embedding's sum). */
  gradientBytes = 0;
  private live = 0;
  /** Bytes each open scope holds, the innermost last. */
  private readonly scopes: number[] = [0];

  constructor(private readonly size: (elements: number) => number) {}

  /** A tensor that lives until its scope ends; `gradient`: a parameter's gradient. */
  keep(elements: number, gradient = false): void {
    const b = this.size(elements);
    this.live += b;
    this.scopes[this.scopes.length - 1] += b;
    if (gradient) this.gradientBytes += b;
    this.peak = Math.max(this.peak, this.live);
  }

  /** Buffers an op allocates and frees within itself, live at once beside everything kept so far. */
  scratch(...elements: number[]): void {
    this.peak = Math.max(this.peak, this.live + elements.reduce((a, n) => a + this.size(n), 0));
  }

  /** A tidy scope: frees all it kept but what `fn` returns (elements of each tensor it made and returns). */
  scope(fn: () => number[]): void {
    this.scopes.push(0);
    const returned = fn();
    this.live -= this.scopes.pop()!;
    for (const n of returned) this.keep(n);
  }
}

/**
 * One gradient pass of `B` examples (train.ts's recordGradientStep in one piece): the batch's upload,
 * the forward, the mean cross-entropy, and backward, which fills the parameters' gradients.
 */
function gradientPass(t: Tape, a: ModelArchitecture, B: number, recompute: boolean, conv: 'direct' | 'gemm'): void {
  let rows: number, classes: number;
  if (a.kind === 'mlp' || a.kind === 'cnn') {
    const inputs = a.kind === 'mlp' ? a.sizes[0] : a.inChannels * a.imageSize ** 2;
    t.keep(B * inputs); // the f32 features
    t.keep(B); // the labels
    rows = B;
    classes = a.kind === 'mlp' ? a.sizes[a.sizes.length - 1] : a.classes;
  } else {
    const N = B * a.context;
    t.keep(N); // the token ids
    // Their positions grouped by id for the embedding gradient (tensor.ts's groupIds): the distinct ids
    // (at most the vocabulary, at most the tokens), where each starts, the positions.
    t.keep(2 * Math.min(a.vocab, N) + 1 + N);
    t.keep(N); // the next-token labels
    rows = N;
    classes = a.vocab;
  }
  const model = a.kind === 'mlp' ? mlpPass(t, a, B) : a.kind === 'cnn' ? cnnPass(t, a, B, conv) : a.kind === 'transformer' ? transformerPass(t, a, B) : gptPass(t, a, B, recompute);
  model.forward();
  // softmaxCrossEntropy: the probabilities (kept for backward) and the mean loss; the per-row losses
  // are freed once averaged.
  t.keep(rows * classes);
  t.keep(1);
  t.scratch(rows);
  t.keep(1); // backward's seed
  t.keep(rows * classes); // d logits
  model.backward();
}

interface ModelPass {
  forward(): void;
  backward(): void;
}

/** A linear layer's output [rows, out] (bias and activation fused in the matmul). */
const linearForward = (t: Tape, rows: number, out: number) => t.keep(rows * out);

/**
 * A linear layer's backward: with a ReLU, d pre-activation (reluGrad of dy and the output); then
 * d input (where the input needs one), d weight and d bias, each a tensor of its own.
 */
function linearBackward(t: Tape, rows: number, inF: number, out: number, opts: { relu?: boolean; dx?: boolean } = {}): void {
  if (opts.relu) t.keep(rows * out);
  if (opts.dx !== false) t.keep(rows * inF);
  t.keep(out * inF, true);
  t.keep(out, true);
}

/** layerNorm keeps its output and each row's mean and 1/σ for backward. */
function layerNormForward(t: Tape, rows: number, C: number): void {
  t.keep(rows * C);
  t.keep(rows);
  t.keep(rows);
}

/** layerNorm's backward kernel makes d input, d gamma and d beta at once. */
function layerNormBackward(t: Tape, rows: number, C: number): void {
  t.keep(rows * C);
  t.keep(C, true);
  t.keep(C, true);
}

function mlpPass(t: Tape, a: { sizes: readonly number[] }, B: number): ModelPass {
  const layers = a.sizes.length - 1;
  return {
    forward: () => {
      for (let i = 0; i < layers; i++) linearForward(t, B, a.sizes[i + 1]);
    },
    backward: () => {
      // The input needs no gradient, so the first layer makes no d input.
      for (let i = layers - 1; i >= 0; i--) linearBackward(t, B, a.sizes[i], a.sizes[i + 1], { relu: i < layers - 1, dx: i > 0 });
    },
  };
}

function cnnPass(t: Tape, a: Extract<ModelArchitecture, { kind: 'cnn' }>, B: number, conv: 'direct' | 'gemm'): ModelPass {
  const [c1, c2] = a.channels;
  const [s0, s1, s2] = cnnSides(a);
  // 3×3 convolutions, padding 1: conv1 a.inChannels → c1 at side s0, conv2 c1 → c2 at side s1.
  const convs = [{ inC: a.inChannels, outC: c1, side: s0, dx: false }, { inC: c1, outC: c2, side: s1, dx: true }];
  const flat = c2 * s2 * s2;
  return {
    forward: () => {
      for (const c of convs) {
        const K = c.inC * 9, P = c.side * c.side, y = B * c.outC * P;
        if (conv === 'gemm' && K % 4 === 0 && P % 4 === 0) {
          t.keep(y); // ReLU fused into the matmul
          t.scratch(B * K * P); // im2col's columns
        } else {
          t.scratch(y, y); // the direct kernel's output and its ReLU copy, live together…
          t.keep(y); // …until the output is freed
        }
        const pooled = B * c.outC * (c.side >> 1) ** 2;
        t.keep(pooled); // maxPool2d's output
        t.keep(pooled); // and its argmax (i32), for backward
      }
      linearForward(t, B, a.hidden);
      linearForward(t, B, a.classes);
    },
    backward: () => {
      linearBackward(t, B, a.hidden, a.classes);
      linearBackward(t, B, flat, a.hidden, { relu: true });
      for (const c of [...convs].reverse()) {
        const K = c.inC * 9, P = c.side * c.side, MN = c.outC * K;
        t.keep(B * c.outC * P); // maxpool's d input
        t.keep(B * c.outC * P); // reluGrad
        if (c.dx) {
          t.keep(B * c.inC * P);
          if (conv === 'gemm' && K % 4 === 0 && P % 4 === 0 && c.outC % 4 === 0) t.scratch(B * K * P); // d columns, folded back by col2im
        }
        t.keep(MN, true); // d weight
        if (conv === 'gemm' && P % 4 === 0) t.scratch(B * K * P, B * MN); // im2col's columns and a d weight per image, summed
        else {
          const splits = filterSplits(B * P, c.outC, K);
          if (splits > 1) t.scratch(splits * MN); // partial sums of the split-K filter gradient
        }
        t.keep(c.outC, true); // d bias…
        t.scratch(B * c.outC); // …summed from per-image channel sums
      }
    },
  };
}

/** Splits of the direct kernel's filter gradient over K = B·outH·outW (tensor's webgpu/kernels/conv.ts, filterSplits). */
function filterSplits(K: number, outC: number, weightsPerOut: number): number {
  const tiles = Math.ceil(outC / 4) * Math.ceil(weightsPerOut / 4);
  const wanted = Math.max(1, Math.min(Math.ceil(2048 / tiles), Math.floor(K / 64)));
  return Math.ceil(K / Math.ceil(K / wanted));
}

/**
 * The position ids both text models look up (transformer.ts's positionIds): [T] and their grouping,
 * made by the first pass and kept for good.
 */
function positions(t: Tape, T: number): void {
  t.keep(T);
  t.keep(3 * T + 1);
}

/** Causal attention composed of matmul, scale and softmax (the default; kept for backward): scores, scaled, probabilities. */
function attentionForward(t: Tape, scores: number, N: number, W: number): void {
  t.keep(scores);
  t.keep(scores);
  t.keep(scores);
  t.keep(N * W); // probabilities · v
}

/** Its backward: d probabilities and d v, softmax's and scale's backward, then d q and d k. */
function attentionBackward(t: Tape, scores: number, N: number, W: number): void {
  t.keep(scores);
  t.keep(N * W);
  t.keep(scores);
  t.keep(scores);
  t.keep(N * W);
  t.keep(N * W);
}

function transformerPass(t: Tape, a: Extract<ModelArchitecture, { kind: 'transformer' }>, B: number): ModelPass {
  const T = a.context, D = a.dim, V = a.vocab, N = B * T, scores = B * a.heads * T * T;
  return {
    forward: () => {
      t.keep(N * D); // token embeddings
      positions(t, T);
      t.keep(T * D); // position embeddings
      t.keep(N * D); // their sum
      for (let l = 0; l < a.layers; l++) {
        layerNormForward(t, N, D);
        for (let i = 0; i < 3; i++) {
          t.keep(N * D); // q, k, v
          t.keep(N * D); // each permuted to heads
        }
        attentionForward(t, scores, N, D);
        t.keep(N * D); // heads permuted back
        t.keep(N * D); // the projection
        t.keep(N * D); // the residual sum
        layerNormForward(t, N, D);
        t.keep(N * 4 * D); // fc
        t.keep(N * 4 * D); // gelu
        t.keep(N * D); // proj
        t.keep(N * D); // the residual sum
      }
      layerNormForward(t, N, D);
      linearForward(t, N, V); // logits
    },
    backward: () => {
      linearBackward(t, N, D, V);
      layerNormBackward(t, N, D);
      for (let l = 0; l < a.layers; l++) {
        // A residual sum passes dy to both its inputs as it is: no tensor.
        linearBackward(t, N, 4 * D, D); // mlp.proj
        t.keep(N * 4 * D); // geluGrad
        linearBackward(t, N, D, 4 * D); // mlp.fc
        layerNormBackward(t, N, D);
        t.keep(N * D); // x1's two gradients summed (residual and ln2)
        linearBackward(t, N, D, D); // attn.proj
        t.keep(N * D); // permuted back to heads
        attentionBackward(t, scores, N, D);
        for (let i = 0; i < 3; i++) t.keep(N * D); // d q, d k, d v permuted back
        for (let i = 0; i < 3; i++) linearBackward(t, N, D, D); // q, k, v
        t.keep(N * D); // ln1's output read three times: two sums
        t.keep(N * D);
        layerNormBackward(t, N, D);
        t.keep(N * D); // the block input's two gradients summed
      }
      t.keep(T * D); // the position embeddings' gradient summed over the examples
      t.keep(V * D, true); // embedding gradients (embeddingBackward makes whole tables)
      t.keep(T * D, true);
    },
  };
}

function gptPass(t: Tape, a: Extract<ModelArchitecture, { kind: 'gpt' }>, B: number, recompute: boolean): ModelPass {
  const T = a.context, W = a.width, V = a.vocab, N = B * T, scores = B * a.heads * T * T;
  const blockForward = () => {
    layerNormForward(t, N, W);
    t.keep(N * 3 * W); // c_attn: q | k | v
    t.keep(N * 3 * W); // permuted to [3, heads, rows, head dim]
    for (let i = 0; i < 3; i++) t.keep(N * W); // q, k, v sliced out (sliceRows copies)
    attentionForward(t, scores, N, W);
    t.keep(N * W); // heads permuted back
    t.keep(N * W); // c_proj
    t.keep(N * W); // the residual sum
    layerNormForward(t, N, W);
    t.keep(N * 4 * W); // c_fc
    t.keep(N * 4 * W); // gelu
    t.keep(N * W); // c_proj
    t.keep(N * W); // the residual sum
  };
  const blockBackward = () => {
    linearBackward(t, N, 4 * W, W); // mlp.c_proj (residual sums pass dy on as it is)
    t.keep(N * 4 * W); // geluGrad
    linearBackward(t, N, W, 4 * W); // mlp.c_fc
    layerNormBackward(t, N, W);
    t.keep(N * W); // x1's two gradients summed
    linearBackward(t, N, W, W); // attn.c_proj
    t.keep(N * W); // permuted back to heads
    attentionBackward(t, scores, N, W);
    for (let i = 0; i < 3; i++) t.keep(N * 3 * W); // each slice's gradient: the whole of q | k | v, zero outside it
    t.keep(N * 3 * W); // the three summed: two sums
    t.keep(N * 3 * W);
    t.keep(N * 3 * W); // permuted back
    linearBackward(t, N, W, 3 * W); // attn.c_attn
    layerNormBackward(t, N, W);
    t.keep(N * W); // the block input's two gradients summed
  };
  // A block's parameters' gradient sizes (the recomputed block returns them with d input).
  const blockGradients = [W, W, 3 * W * W, 3 * W, W * W, W, W, W, 4 * W * W, 4 * W, 4 * W * W, W];
  return {
    forward: () => {
      t.keep(N * W); // token embeddings
      positions(t, T);
      t.keep(T * W); // position embeddings
      t.keep(N * W); // their sum
      for (let l = 0; l < a.layers; l++) {
        if (!recompute) blockForward();
        // Without gradients, in a scope of its own: only the block's output stays.
        else t.scope(() => (blockForward(), [N * W]));
      }
      layerNormForward(t, N, W);
      t.keep(N * V); // logits = ln_f(x) · wteᵀ
    },
    backward: () => {
      t.keep(N * W); // d ln_f output
      t.keep(V * W, true); // wte's gradient from the tied head
      layerNormBackward(t, N, W);
      for (let l = 0; l < a.layers; l++) {
        if (!recompute) blockBackward();
        // The block again, with gradients, then its backward; d input and its parameters' gradients stay.
        else t.scope(() => (blockForward(), blockBackward(), [N * W, ...blockGradients]));
      }
      t.keep(T * W); // the position embeddings' gradient summed over the examples
      t.keep(V * W, true); // wte's gradient from the lookup (a whole table)
      t.keep(T * W, true); // wpe's
      t.keep(V * W, true); // wte's two gradients summed
    },
  };
}

function checkArchitecture(a: ModelArchitecture): void {
  const positive = (name: string, v: unknown) => {
    if (!(typeof v === 'number' && Number.isInteger(v) && v >= 1)) throw new Error(`${a.kind} ${name} ${String(v)}: need a positive integer`);
  };
  switch (a.kind) {
    case 'mlp':
      if (!Array.isArray(a.sizes) || a.sizes.length < 2) throw new Error('an MLP needs at least input and output sizes');
      a.sizes.forEach((s, i) => positive(`sizes[${i}]`, s));
      return;
    case 'cnn':
      for (const k of ['inChannels', 'imageSize', 'hidden', 'classes'] as const) positive(k, a[k]);
      if (!Array.isArray(a.channels) || a.channels.length !== 2) throw new Error('a cnn needs two channel counts');
      a.channels.forEach((c, i) => positive(`channels[${i}]`, c));
      if (a.imageSize < 4) throw new Error(`cnn imageSize ${a.imageSize}: two 2×2 poolings need at least 4`);
      return;
    case 'transformer':
    case 'gpt': {
      const width = a.kind === 'gpt' ? a.width : a.dim;
      for (const k of ['vocab', 'context', 'heads', 'layers'] as const) positive(k, a[k]);
      positive(a.kind === 'gpt' ? 'width' : 'dim', width);
      if (width % a.heads !== 0) throw new Error(`${a.kind} ${a.kind === 'gpt' ? 'width' : 'dim'} ${width} is not a multiple of ${a.heads} heads`);
      return;
    }
    default:
      throw new Error(`unknown model kind ${JSON.stringify((a as { kind: unknown }).kind)}`);
  }
}
