// The pieces memory-estimate.ts replays a gradient pass with: buffers in tidy scopes (tensor's
// tensor.ts), tensors that carry only their size and their gradient node, the ops the models use as
// tensor's ops/*.ts allocate (what each makes, what its backward functions make, the scratch it frees
// within itself), and autograd's `gradients`, `backward` and `checkpoint` (tensor's autograd.ts) with
// the same processing order and the same frees. Nothing is computed: a buffer is a number of bytes.
// When an op or autograd changes what it allocates or frees, this file follows it; nn's
// memory-estimate.test.ts measures the real thing against it.

/** A buffer the runtime hands out: its pooled size. */
interface PooledBuffer {
  readonly bytes: number;
}

/** Live bytes over a replayed pass, and their peak; buffers belong to tidy scopes as in tensor.ts. */
export class Memory {
  peak = 0;
  live = 0;
  /** Each open scope's buffers, the innermost last; the first is outside any scope (never ends). */
  private readonly scopes: Set<PooledBuffer>[] = [new Set()];
  private readonly persistent = new WeakSet<PooledBuffer>();
  gradEnabled = true;

  constructor(readonly size: (elements: number) => number) {}

  /** A pooled buffer of `elements` 4-byte values, owned by the innermost scope. */
  alloc(elements: number): PooledBuffer {
    const b = { bytes: this.size(elements) };
    this.live += b.bytes;
    this.peak = Math.max(this.peak, this.live);
    this.scopes[this.scopes.length - 1].add(b);
    return b;
  }

  /** Buffers an op allocates and frees within itself (in this order, all live at once at the end). */
  scratch(...elements: number[]): void {
    const bufs = elements.map((n) => this.alloc(n));
    for (const b of bufs) this.release(b);
  }

  /** The runtime's release: back to the pool, so no longer live. */
  release(b: PooledBuffer): void {
    for (const s of this.scopes) s.delete(b);
    this.live -= b.bytes;
  }

  /** keepForever: no scope releases it (the text models' position ids). */
  keepForever(b: PooledBuffer): void {
    this.persistent.add(b);
  }

  /** tidy: frees all `fn` made but the buffers of what it returns, which the enclosing scope adopts. */
  tidy<R>(fn: () => R, kept: (r: R) => PooledBuffer[]): R {
    const scope = new Set<PooledBuffer>();
    this.scopes.push(scope);
    const r = fn();
    this.scopes.pop();
    const keep = new Set(kept(r));
    for (const b of scope) {
      if (keep.has(b)) this.scopes[this.scopes.length - 1].add(b);
      else if (!this.persistent.has(b)) this.live -= b.bytes;
    }
    return r;
  }

  /** scopeSnapshot: what the innermost scope holds now. */
  snapshot(): Set<PooledBuffer> {
    return new Set(this.scopes[this.scopes.length - 1]);
  }

  /** releaseScoped: frees `b` now if the innermost scope holds it and did not at the snapshot `before`. */
  releaseScoped(b: PooledBuffer, before: Set<PooledBuffer>): void {
    const scope = this.scopes[this.scopes.length - 1];
    if (before.has(b) || !scope.has(b) || this.persistent.has(b)) return;
    scope.delete(b);
    this.live -= b.bytes;
  }

  noGrad<R>(fn: () => R): R {
    const prev = this.gradEnabled;
    this.gradEnabled = false;
    try {
      return fn();
    } finally {
      this.gradEnabled = prev;
    }
  }
}

type Thunks = ((() => Sym) | null)[];

interface GradNode {
  readonly inputs: readonly Sym[];
  backward(dy: Sym): Thunks;
}

/** A tensor as far as memory goes: its buffer (shared by views), its size, and its gradient node. */
export class Sym {
  /** A parameter's slot in the flat gradient buffer (backward copies its gradient there, then frees it). */
  hasGradSlot = false;

  constructor(
    readonly mem: Memory,
    readonly buf: PooledBuffer,
    readonly size: number,
    readonly requiresGrad: boolean,
    readonly node: GradNode | null,
  ) {}

  /** reshape: the same buffer; its gradient is a view of dy. */
  view(): Sym {
    return derived(this.mem, this.buf, this.size, [this], (dy) => [() => dy.view()]);
  }
}

function derived(mem: Memory, buf: PooledBuffer, size: number, inputs: readonly Sym[], backward: (dy: Sym) => Thunks): Sym {
  const needs = mem.gradEnabled && inputs.some((t) => t.requiresGrad);
  return new Sym(mem, buf, size, needs, needs ? { inputs, backward } : null);
}

/** An op's output in a new buffer. */
const made = (mem: Memory, size: number, inputs: readonly Sym[], backward: (dy: Sym) => Thunks) => derived(mem, mem.alloc(size), size, inputs, backward);

/** A tensor in a new buffer, no node: what a backward function makes (a gradient, or its own tensor kept to the scope's end). */
const fresh = (mem: Memory, size: number): Sym => new Sym(mem, mem.alloc(size), size, false, null);

/** Data uploaded outside the pass's scope (features, labels, ids), or made persistent. */
export function upload(mem: Memory, size: number): Sym {
  return fresh(mem, size);
}

/** A parameter: a view of the flat parameter buffer, with a slot in the flat gradient buffer. */
export function parameter(mem: Memory, size: number): Sym {
  const p = new Sym(mem, { bytes: 0 }, size, true, null);
  p.hasGradSlot = true;
  return p;
}

// ---- autograd.ts ------------------------------------------------------------------------------

function topoOrder(root: Sym): Sym[] {
  const order: Sym[] = [];
  const seen = new Set<Sym>();
  const stack: [Sym, boolean][] = [[root, false]];
  while (stack.length) {
    const [t, expanded] = stack.pop()!;
    if (expanded) {
      order.push(t);
      continue;
    }
    if (seen.has(t)) continue;
    seen.add(t);
    stack.push([t, true]);
    for (const inp of t.node?.inputs ?? []) if (inp.requiresGrad && !seen.has(inp)) stack.push([inp, false]);
  }
  return order;
}

/**
 * autograd.ts's gradients: nodes in reverse topological order; a node's gradient and the gradients its
 * sums spent are freed once all its backward functions ran, unless a pending gradient shares their
 * buffer, and only if made after backward began. `onLeaf` says whether a leaf keeps its gradient.
 */
function gradients(output: Sym, seed?: Sym, onLeaf?: (leaf: Sym, g: Sym) => boolean): Map<Sym, Sym> {
  const mem = output.mem;
  const before = mem.snapshot();
  seed ??= fresh(mem, 1);
  const grads = new Map<Sym, Sym>();
  const uses = new Map<PooledBuffer, number>();
  const hold = (t: Sym) => uses.set(t.buf, (uses.get(t.buf) ?? 0) + 1);
  const drop = (t: Sym) => uses.set(t.buf, uses.get(t.buf)! - 1);
  const freeIfUnused = (t: Sym) => {
    if (!uses.get(t.buf)) mem.releaseScoped(t.buf, before);
  };
  grads.set(output, seed);
  hold(seed);
  const leafGrads = new Map<Sym, Sym>();
  const order = topoOrder(output);
  for (let i = order.length - 1; i >= 0; i--) {
    const t = order[i];
    const g = grads.get(t);
    if (!g) continue;
    grads.delete(t);
    if (!t.node) {
      if (!onLeaf) {
        leafGrads.set(t, g);
        continue;
      }
      if (onLeaf(t, g)) continue;
      drop(g);
      freeIfUnused(g);
      continue;
    }
    const thunks = t.node.backward(g);
    const spent: Sym[] = [g];
    t.node.inputs.forEach((inp, k) => {
      const thunk = thunks[k];
      if (!inp.requiresGrad || !thunk) return;
      const gi = thunk();
      const prev = grads.get(inp);
      if (!prev) {
        grads.set(inp, gi);
        hold(gi);
        return;
      }
      const sum = add(prev, gi);
      drop(prev);
      spent.push(prev, gi);
      grads.set(inp, sum);
      hold(sum);
    });
    drop(g);
    for (const x of spent) freeIfUnused(x);
  }
  return leafGrads;
}

/** autograd.ts's backward: a parameter's gradient is copied into its slot and freed; another leaf keeps its own. */
export function backward(output: Sym): void {
  gradients(output, undefined, (leaf) => !leaf.hasGradSlot);
}

/** autograd.ts's checkpoint: `fn`'s forward in a scope that keeps only its output; backward runs it again. */
export function checkpoint(fn: (x: Sym) => Sym, x: Sym, params: readonly Sym[]): Sym {
  const mem = x.mem;
  const y = mem.noGrad(() => mem.tidy(() => fn(x), (t) => [t.buf]));
  const inputs = [x, ...params];
  const recompute = (dy: Sym): Sym[] => mem.tidy(() => {
    const xr = new Sym(mem, x.buf, x.size, x.requiresGrad, null);
    const leafGrads = gradients(fn(xr), dy);
    return inputs.map((t, k) => leafGrads.get(k === 0 ? xr : t) ?? fresh(mem, t.size));
  }, (gs) => gs.map((g) => g.buf));
  const backwardFn = (dy: Sym): Thunks => {
    let grads: Sym[] | null = null;
    return inputs.map((_, k) => () => (grads ??= recompute(dy))[k]);
  };
  return derived(mem, y.buf, y.size, inputs, backwardFn);
}

// ---- ops (tensor's ops/*.ts, with the WebGPU backend's allocations) ------------------------------------------

/** add of two same-shaped tensors: its gradient passes dy to both inputs as it is. */
export function add(a: Sym, b: Sym): Sym {
  return made(a.mem, a.size, [a, b], (dy) => [() => dy, () => dy]);
}

/** add of a [B, rows, C] tensor and a [rows, C] one broadcast over B: b's gradient is dy summed over B (a view of it). */
export function addBroadcast(a: Sym, b: Sym): Sym {
  return made(a.mem, a.size, [a, b], (dy) => [() => dy, () => fresh(a.mem, b.size).view()]);
}

/** An elementwise unary op (scale, gelu): its gradient is one op on dy (and the input) of the same size. */
export const unary = (x: Sym): Sym => made(x.mem, x.size, [x], () => [() => fresh(x.mem, x.size)]);

/** softmax, and permute: the same shape of gradient. */
export const softmax = unary;
export const permute = unary;

/** matmul of a and b into `out` values (batched or not): each input's gradient is a matmul of its size. */
export function matmul(a: Sym, b: Sym, out: number): Sym {
  return made(a.mem, out, [a, b], () => [() => fresh(a.mem, a.size), () => fresh(a.mem, b.size)]);
}

/** linear: x [rows, in] · weightᵀ + bias, ReLU fused where asked; with a ReLU, d pre-activation first (kept). */
export function linear(x: Sym, w: Sym, bias: Sym, rows: number, out: number, relu = false): Sym {
  const mem = x.mem;
  return made(mem, rows * out, [x, w, bias], () => {
    if (relu) fresh(mem, rows * out);
    return [() => fresh(mem, x.size), () => fresh(mem, w.size), () => fresh(mem, out)];
  });
}

/** layerNorm over rows of C: output, mean and 1/σ; backward's kernel makes d input, d gamma and d beta at once. */
export function layerNorm(x: Sym, gamma: Sym, beta: Sym, rows: number, C: number): Sym {
  const mem = x.mem;
  const y = mem.alloc(rows * C);
  mem.alloc(rows);
  mem.alloc(rows);
  return derived(mem, y, rows * C, [x, gamma, beta], () => {
    let grads: Sym[] | null = null;
    const all = () => (grads ??= [fresh(mem, rows * C), fresh(mem, C), fresh(mem, C)]);
    return [() => all()[0], () => all()[1], () => all()[2]];
  });
}

/** An embedding lookup of `rows` ids into a [V, D] table: its gradient is a whole table. */
export function embedding(table: Sym, ids: Sym, rows: number, D: number): Sym {
  return made(table.mem, rows * D, [table, ids], () => [() => fresh(table.mem, table.size), null]);
}

/** sliceRows: a copy of `count` of x's rows; its gradient is the whole of x, zero outside them. */
export function sliceRows(x: Sym, size: number): Sym {
  return made(x.mem, size, [x], () => [() => fresh(x.mem, x.size)]);
}

/** softmaxCrossEntropy: the probabilities (kept for backward), the mean loss; the per-row losses freed once averaged. */
export function softmaxCrossEntropy(logits: Sym, labels: Sym, rows: number, classes: number): Sym {
  const mem = logits.mem;
  const loss = mem.alloc(rows);
  mem.alloc(rows * classes);
  const mean = mem.alloc(1);
  mem.release(loss);
  return derived(mem, mean, 1, [logits, labels], () => [() => fresh(mem, rows * classes), null]);
}

/** A 3×3 convolution, padding 1, over `side`×`side` images, ReLU fused; `gemm`: im2col + matmul (with scratch). */
export interface ConvShape {
  batch: number;
  inC: number;
  outC: number;
  side: number;
  gemm: boolean;
}

/** conv2d with a ReLU (tensor's ops/conv.ts; the backend's conv2d* and webgpu/kernels/conv*.ts). */
export function conv2d(x: Sym, w: Sym, bias: Sym, c: ConvShape): Sym {
  const mem = x.mem;
  const K = c.inC * 9, P = c.side * c.side, y = c.batch * c.outC * P, MN = c.outC * K;
  const gemm = { forward: c.gemm && K % 4 === 0 && P % 4 === 0, input: c.gemm && K % 4 === 0 && P % 4 === 0 && c.outC % 4 === 0, filter: c.gemm && P % 4 === 0 };
  let out = mem.alloc(y);
  if (gemm.forward) mem.scratch(c.batch * K * P); // im2col's columns
  else {
    // The direct kernel, then its ReLU as a separate op: the output is freed once copied.
    const z = mem.alloc(y);
    mem.release(out);
    out = z;
  }
  return derived(mem, out, y, [x, w, bias], () => {
    fresh(mem, y); // reluGrad of dy (kept to the scope's end)
    return [
      () => {
        const dx = fresh(mem, x.size);
        if (gemm.input) mem.scratch(c.batch * K * P); // d columns, folded back by col2im
        return dx;
      },
      () => {
        const dw = fresh(mem, MN);
        if (gemm.filter) mem.scratch(c.batch * K * P, c.batch * MN); // im2col's columns and a d weight per image, summed
        else {
          const splits = filterSplits(c.batch * P, c.outC, K);
          if (splits > 1) mem.scratch(splits * MN); // partial sums of the split-K filter gradient
        }
        return dw;
      },
      () => {
        const perChannel = mem.alloc(c.batch * c.outC); // d bias, summed from per-image channel sums
        const db = fresh(mem, c.outC);
        mem.release(perChannel);
        return db;
      },
    ];
  });
}

/** Splits of the direct kernel's filter gradient over K = B·outH·outW (tensor's webgpu/kernels/conv.ts, filterSplits). */
function filterSplits(K: number, outC: number, weightsPerOut: number): number {
  const tiles = Math.ceil(outC / 4) * Math.ceil(weightsPerOut / 4);
  const wanted = Math.max(1, Math.min(Math.ceil(2048 / tiles), Math.floor(K / 64)));
  return Math.ceil(K / Math.ceil(K / wanted));
}

/** maxPool2d into `size` values: its output and argmax (i32, kept for backward); its gradient is the size of its input. */
export function maxPool2d(x: Sym, size: number): Sym {
  const mem = x.mem;
  const y = mem.alloc(size);
  mem.alloc(size);
  return derived(mem, y, size, [x], () => [() => fresh(mem, x.size)]);
}
