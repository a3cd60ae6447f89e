// What a job's model needs in a tab's GPU memory, from its architecture alone (the dashboard's job
// form; no GPU code here): the parameters, the gradient buffer, the inner optimizer's state, and what a
// gradient pass adds per example with and without activation recompute. The pass is replayed tensor
// by tensor as packages/nn's models and packages/tensor's ops make them, so its peak is the one the
// WebGPU runtime counts and a tab's planner probes (nn's memory-plan.ts, probeMemory); nn's
// memory-estimate.test.ts checks these figures against measured peaks.
//
// What the replay rests on (memory-replay.ts holds the pieces: scopes, ops, autograd):
// - A gradient pass is one `tidy` scope (nn's train.ts, recordWholeBatch). The scope frees what was
//   made in it when it ends; before that, only autograd frees (below) and a kernel its own scratch.
//   So the forward's tensors, and tensors a backward function makes for itself (a transpose, a
//   ReLU's gradient mask), stay live to the end of the pass.
// - Backward (tensor's autograd.ts, gradients) visits nodes in reverse topological order (an
//   iterative post-order DFS from the loss, inputs pushed in order). A node's gradient, and the two
//   gradients a sum for a tensor read twice replaces, are freed once all its backward functions ran,
//   unless a pending gradient shares their buffer (a reshape's view, an add's pass-through), and only
//   if backward made them (what the scope held before backward began is left to the scope). A
//   parameter's gradient is copied into the flat gradient buffer when its leaf is reached, and freed;
//   parameters are their ops' later inputs (a linear's weight and bias after its x), so their leaves
//   come after every node below those ops: most parameters' gradients are pending until backward's end.
//   The replay runs this same algorithm over a graph of sizes, so the order and the frees are the code's.
// - Activation recompute (autograd.ts's checkpoint, the GPT's blocks) runs a block's forward in a scope
//   that keeps only the block's output; backward runs the block again, with its own `gradients`, in a
//   scope that frees all but the gradients the block returns (d input and its parameters'). So one
//   block's activations are live at a time.
// - The WebGPU runtime (tensor's webgpu/runtime.ts, GpuRuntime.bucket) hands out pooled buffers: a
//   power of two bytes, 256 at least, up to 1 MiB; past that a multiple of a sixteenth of the next
//   power of two. A tensor whose pooled size would pass the adapter's largest storage binding gets
//   its own size (rounded to 16 bytes). `rounding: 'f32'` gives plain 4 bytes a value.
import { INNER_OPTIMIZERS, type InnerOptimizer } from './jobs';
import { architectureLayout, cnnSides, type ModelArchitecture } from './layout';
import { architectureOf, type ModelRef } from './models';
import {
  add, addBroadcast, backward, checkpoint, conv2d, embedding, layerNorm, linear, matmul, maxPool2d, Memory, parameter, permute, sliceRows, softmax,
  softmaxCrossEntropy, type Sym, unary, upload,
} from './memory-replay';

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
   * The flat gradient buffer (alignment padding included). The gradient tensors backward makes for the
   * parameters are transient (each freed once copied into it) and are counted in the pass's figures
   * (fixed, batch) where they are live, not here; as leaves come last in backward's order, most of them
   * are live at a pass's peak.
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
  const pass = (examples: number, recompute: boolean) => gradientPass(size, arch, examples, recompute, conv);
  const figures = (recompute: boolean) => {
    const one = pass(1, recompute), two = pass(2, recompute);
    const perExample = two - one;
    const batch = batchSize === 1 ? one : batchSize === 2 ? two : pass(batchSize, recompute);
    return { perExample, fixed: buffers + one - perExample, batch: buffers + batch };
  };
  const plain = figures(false);
  // Only the GPT checkpoints its blocks (nn's Model.recompute); the other models always keep everything.
  const recomputed = arch.kind === 'gpt' ? figures(true) : null;
  return {
    architecture: arch,
    optimizer,
    rounding,
    parameters,
    gradients: flatGradients,
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

/**
 * One gradient pass of `B` examples (train.ts's recordWholeBatch): the batch's upload (outside the
 * pass's scope), then in one tidy scope the forward, the mean cross-entropy and backward, which fills
 * the parameters' slots in the flat gradient buffer. Returns its peak live bytes.
 */
function gradientPass(size: (elements: number) => number, a: ModelArchitecture, B: number, recompute: boolean, conv: 'direct' | 'gemm'): number {
  const mem = new Memory(size);
  let x: Sym, labels: Sym, rows: number, classes: number;
  if (a.kind === 'mlp' || a.kind === 'cnn') {
    x = upload(mem, B * (a.kind === 'mlp' ? a.sizes[0] : a.inChannels * a.imageSize ** 2)); // the f32 features
    labels = upload(mem, B);
    rows = B;
    classes = a.kind === 'mlp' ? a.sizes[a.sizes.length - 1] : a.classes;
  } else {
    const N = B * a.context;
    x = upload(mem, N); // the token ids
    // Their positions grouped by id for the embedding gradient (tensor.ts's groupIds): the distinct ids
    // (at most the vocabulary, at most the tokens), where each starts, the positions.
    upload(mem, 2 * Math.min(a.vocab, N) + 1 + N);
    labels = upload(mem, N); // the next-token labels
    rows = N;
    classes = a.vocab;
  }
  const forward = a.kind === 'mlp' ? mlp(mem, a) : a.kind === 'cnn' ? cnn(mem, a, conv) : a.kind === 'transformer' ? transformer(mem, a) : gpt(mem, a, recompute);
  mem.tidy(() => {
    const loss = softmaxCrossEntropy(forward(x, B), labels, rows, classes);
    backward(loss);
    return loss;
  }, (loss) => [loss.buf]);
  return mem.peak;
}

/** A model's forward as nn's models/*.ts build it, over parameters made once: ids or features of B examples → logits. */
type Forward = (x: Sym, B: number) => Sym;

/** nn's Linear: weight [out, in] and bias [out]; x [rows, in] → [rows, out]. */
function linearLayer(mem: Memory, inF: number, out: number) {
  const w = parameter(mem, out * inF), b = parameter(mem, out);
  return { params: [w, b], forward: (x: Sym, rows: number, relu = false) => linear(x, w, b, rows, out, relu) };
}

/** nn's LayerNorm over C. */
function layerNormLayer(mem: Memory, C: number) {
  const g = parameter(mem, C), b = parameter(mem, C);
  return { params: [g, b], forward: (x: Sym, rows: number) => layerNorm(x, g, b, rows, C) };
}

function mlp(mem: Memory, a: { sizes: readonly number[] }): Forward {
  const layers = a.sizes.slice(1).map((out, i) => linearLayer(mem, a.sizes[i], out));
  return (x, B) => layers.reduce((h, l, i) => l.forward(h, B, i < layers.length - 1), x.view());
}

function cnn(mem: Memory, a: Extract<ModelArchitecture, { kind: 'cnn' }>, conv: 'direct' | 'gemm'): Forward {
  const [c1, c2] = a.channels;
  const [s0, s1, s2] = cnnSides(a);
  const convs = [{ inC: a.inChannels, outC: c1, side: s0 }, { inC: c1, outC: c2, side: s1 }].map((c) => ({ ...c, w: parameter(mem, c.outC * c.inC * 9), b: parameter(mem, c.outC) }));
  const fc1 = linearLayer(mem, c2 * s2 * s2, a.hidden), fc2 = linearLayer(mem, a.hidden, a.classes);
  return (x, B) => {
    let h = x.view();
    for (const c of convs) h = maxPool2d(conv2d(h, c.w, c.b, { batch: B, ...c, gemm: conv === 'gemm' }), B * c.outC * (c.side >> 1) ** 2);
    return fc2.forward(fc1.forward(h.view(), B, true), B);
  };
}

/**
 * The position ids both text models look up (transformer.ts's positionIds): [T] and their grouping,
 * made by the first pass and kept for good.
 */
function positionIds(mem: Memory, T: number): Sym {
  const ids = upload(mem, T);
  mem.keepForever(ids.buf);
  mem.keepForever(upload(mem, 3 * T + 1).buf);
  return ids;
}

/** The text models' input: token embeddings [B, T, W] plus position embeddings [T, W], as [B·T, W]. */
function embed(mem: Memory, ids: Sym, wte: Sym, wpe: Sym, B: number, T: number, W: number): Sym {
  const tok = embedding(wte, ids, B * T, W).view();
  const pos = embedding(wpe, positionIds(mem, T), T, W);
  return addBroadcast(tok, pos).view();
}

/** Causal attention composed of matmul, scale and causal softmax (tensor's ops/attention.ts, the WebGPU default). */
function attention(q: Sym, k: Sym, v: Sym, scores: number): Sym {
  return matmul(softmax(unary(matmul(q, k, scores))), v, q.size);
}

function transformer(mem: Memory, a: Extract<ModelArchitecture, { kind: 'transformer' }>): Forward {
  const T = a.context, D = a.dim;
  const tokens = parameter(mem, a.vocab * D), positions = parameter(mem, T * D);
  const blocks = Array.from({ length: a.layers }, () => ({
    ln1: layerNormLayer(mem, D), q: linearLayer(mem, D, D), k: linearLayer(mem, D, D), v: linearLayer(mem, D, D), proj: linearLayer(mem, D, D),
    ln2: layerNormLayer(mem, D), fc: linearLayer(mem, D, 4 * D), out: linearLayer(mem, 4 * D, D),
  }));
  const lnF = layerNormLayer(mem, D), head = linearLayer(mem, D, a.vocab);
  return (ids, B) => {
    const N = B * T;
    let x = embed(mem, ids, tokens, positions, B, T, D);
    for (const b of blocks) {
      const h = b.ln1.forward(x, N);
      const split = (t: Sym) => permute(t.view()).view(); // [B·T, D] → [B·H, T, Dh]
      const q = split(b.q.forward(h, N)), k = split(b.k.forward(h, N)), v = split(b.v.forward(h, N));
      const y = permute(attention(q, k, v, B * a.heads * T * T).view()).view();
      const x1 = add(x, b.proj.forward(y, N));
      x = add(x1, b.out.forward(unary(b.fc.forward(b.ln2.forward(x1, N), N)), N));
    }
    return head.forward(lnF.forward(x, N), N);
  };
}

function gpt(mem: Memory, a: Extract<ModelArchitecture, { kind: 'gpt' }>, recompute: boolean): Forward {
  const T = a.context, W = a.width;
  const wte = parameter(mem, a.vocab * W), wpe = parameter(mem, T * W);
  const blocks = Array.from({ length: a.layers }, () => ({
    ln1: layerNormLayer(mem, W), cAttn: linearLayer(mem, W, 3 * W), attnProj: linearLayer(mem, W, W),
    ln2: layerNormLayer(mem, W), cFc: linearLayer(mem, W, 4 * W), mlpProj: linearLayer(mem, 4 * W, W),
  }));
  const lnF = layerNormLayer(mem, W);
  return (ids, B) => {
    const N = B * T;
    const block = (b: (typeof blocks)[number], x: Sym) => {
      // c_attn's q | k | v permuted to [3, heads, rows, head dim]; each sliced out (a copy) as [H·B, T, Dh].
      const qkv = permute(b.cAttn.forward(b.ln1.forward(x, N), N).view()).view();
      const part = () => sliceRows(qkv, N * W).view();
      const y = permute(attention(part(), part(), part(), B * a.heads * T * T).view()).view();
      const x1 = add(x, b.attnProj.forward(y, N));
      return add(x1, b.mlpProj.forward(unary(b.cFc.forward(b.ln2.forward(x1, N), N)), N));
    };
    let x = embed(mem, ids, wte, wpe, B, T, W);
    for (const b of blocks) {
      const params = [b.ln1, b.cAttn, b.attnProj, b.ln2, b.cFc, b.mlpProj].flatMap((l) => l.params);
      x = recompute ? checkpoint((h) => block(b, h), x, params) : block(b, x);
    }
    // The head is the token embedding (weight tying): logits = ln_f(x) · wteᵀ.
    return matmul(lnF.forward(x, N), wte, N * a.vocab);
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
