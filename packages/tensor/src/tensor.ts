// Tensors and reverse-mode autograd. A tensor is a shape over backend storage plus, when it was
// produced by a differentiable op, the node that knows how to push gradients to its inputs.
import type { Backend, DType, Storage } from './backend';
import { numel } from './shape';

export interface GradNode {
  readonly name: string;
  readonly inputs: readonly Tensor[];
  /**
   * Given the output gradient, one thunk per input computing that input's gradient (null where it
   * has none); autograd calls only the thunks of inputs that require grad.
   */
  backward(dy: Tensor): GradThunks;
}

export type GradThunks = ((() => Tensor) | null)[];

let nextTensorId = 1;

export class Tensor {
  readonly id = nextTensorId++;
  /** Gradient slot for leaves (e.g. a view into the flat gradient buffer); filled by backward(). */
  grad: Tensor | null = null;
  /** Token ids only: their positions grouped by id (`groupIds`), uploaded with them, for the embedding gradient. */
  idGroups: IdGroups | null = null;

  constructor(
    readonly backend: Backend,
    readonly storage: Storage,
    readonly shape: readonly number[],
    readonly dtype: DType = 'f32',
    public requiresGrad = false,
    readonly node: GradNode | null = null,
    /** False for views of another tensor's storage (reshape): its owner releases it. */
    ownsStorage = true,
  ) {
    if (numel(shape) > storage.size) throw new Error(`shape [${shape}] needs ${numel(shape)} elements, storage has ${storage.size}`);
    if (ownsStorage) currentScope()?.track(this);
  }

  get size(): number {
    return numel(this.shape);
  }

  async data(): Promise<Float32Array | Int32Array> {
    const all = await this.backend.read(this.storage, this.dtype);
    return all.length === this.size ? all : all.subarray(0, this.size);
  }

  async toFloat32(): Promise<Float32Array> {
    const d = await this.data();
    return d instanceof Float32Array ? d : Float32Array.from(d);
  }

  /** Same storage, new shape. */
  reshape(shape: number[]): Tensor {
    const inferred = inferShape(shape, this.size);
    return derived(this.backend, this.storage, inferred, [this], 'reshape', (dy) => [() => dy.reshape([...this.shape])], this.dtype, false);
  }
}

function inferShape(shape: number[], size: number): number[] {
  const unknown = shape.indexOf(-1);
  if (unknown >= 0) {
    const known = shape.reduce((a, d, i) => (i === unknown ? a : a * d), 1);
    shape = shape.map((d, i) => (i === unknown ? size / known : d));
  }
  if (numel(shape) !== size || shape.some((d) => !Number.isInteger(d) || d < 0)) {
    throw new Error(`cannot reshape ${size} elements to [${shape}]`);
  }
  return shape;
}

/**
 * Builds an op's output tensor; attaches a grad node only when some input requires grad.
 * `owns` says whether the storage is new (and so released with the scope) or borrowed.
 */
export function derived(
  backend: Backend,
  storage: Storage,
  shape: readonly number[],
  inputs: readonly Tensor[],
  name: string,
  backward: (dy: Tensor) => GradThunks,
  dtype: DType = 'f32',
  owns = true,
): Tensor {
  const needs = gradEnabled && inputs.some((t) => t.requiresGrad);
  const node = needs ? { name, inputs, backward } : null;
  return new Tensor(backend, storage, shape, dtype, needs, node, owns);
}

// ---------------------------------------------------------------------------------------------
// Scopes: every tensor made inside `tidy` is released when it ends, except what it returns or keeps.

class Scope {
  private readonly owned = new Set<Storage>();
  private readonly backends = new Map<Storage, Backend>();

  track(t: Tensor): void {
    if (persistentStorages.has(t.storage)) return;
    this.owned.add(t.storage);
    this.backends.set(t.storage, t.backend);
  }

  release(keep: Set<Storage>): void {
    for (const s of this.owned) {
      if (keep.has(s) || persistentStorages.has(s)) continue;
      this.backends.get(s)!.release(s);
    }
    // Kept storages move to the enclosing scope.
    const parent = currentScope();
    if (parent) for (const s of keep) if (this.owned.has(s)) parent.adopt(s, this.backends.get(s)!);
  }

  adopt(s: Storage, b: Backend): void {
    this.owned.add(s);
    this.backends.set(s, b);
  }

  /** The storages this scope holds now (backward frees only what it made after this). */
  snapshot(): Set<Storage> {
    return new Set(this.owned);
  }

  /** Releases `s` before the scope ends, if this scope holds it (else false: it is not this scope's to free). */
  releaseNow(s: Storage): boolean {
    if (!this.owned.has(s) || persistentStorages.has(s)) return false;
    this.owned.delete(s);
    this.backends.get(s)!.release(s);
    this.backends.delete(s);
    return true;
  }
}

const scopes: Scope[] = [];
const persistentStorages = new WeakSet<Storage>();
let gradEnabled = true;

function currentScope(): Scope | undefined {
  return scopes[scopes.length - 1];
}

/** Marks storage as long-lived (parameters, optimizer state): no scope ever releases it. */
export function keepForever(t: Tensor): Tensor {
  persistentStorages.add(t.storage);
  return t;
}

type Kept = Tensor | Tensor[] | Record<string, Tensor> | void | undefined;

/** Runs fn and releases every tensor it created except the returned ones (and `keep`). */
export function tidy<T extends Kept>(fn: () => T, keep: Tensor[] = []): T {
  const scope = new Scope();
  scopes.push(scope);
  let result: T;
  try {
    result = fn();
  } catch (e) {
    scopes.pop();
    scope.release(new Set(keep.map((t) => t.storage))); // a failed step (out of memory) leaks nothing
    throw e;
  }
  scopes.pop();
  const kept = new Set<Storage>(keep.map((t) => t.storage));
  if (result instanceof Tensor) kept.add(result.storage);
  else if (Array.isArray(result)) for (const t of result) kept.add(t.storage);
  else if (result && typeof result === 'object') for (const t of Object.values(result)) if (t instanceof Tensor) kept.add(t.storage);
  scope.release(kept);
  return result;
}

/** What the innermost scope holds now (null outside any scope): autograd's backward frees only storage made after it. */
export function scopeSnapshot(): Set<Storage> | null {
  return currentScope()?.snapshot() ?? null;
}

/** Releases `s` now if the innermost scope holds it and `before` (its snapshot) did not; true if freed. */
export function releaseScoped(s: Storage, before: Set<Storage>): boolean {
  if (before.has(s)) return false;
  return currentScope()?.releaseNow(s) ?? false;
}

/** Releases a tensor made outside any scope (or kept from one). */
export function dispose(t: Tensor): void {
  if (!persistentStorages.has(t.storage)) t.backend.release(t.storage);
  if (t.idGroups) dispose(t.idGroups.index);
}

/**
 * Positions of token ids grouped by id, stably (increasing position within an id): `index` is i32
 * [rows (k distinct ids), starts (k + 1), positions (T)]. The embedding gradient then reads each row's
 * own positions, O(T·D), instead of every id for every vocabulary row, O(V·T).
 */
export interface IdGroups {
  index: Tensor;
  /** Distinct ids. */
  rows: number;
}

/** The packed grouping of `ids` (host data): [distinct ids ascending, their starts, positions by id]. */
export function groupIds(ids: Int32Array): { packed: Int32Array; rows: number } {
  const order = Int32Array.from(ids.keys()).sort((a, b) => ids[a] - ids[b] || a - b);
  const rows: number[] = [], starts: number[] = [];
  for (let p = 0; p < order.length; p++) {
    if (p === 0 || ids[order[p]] !== ids[order[p - 1]]) {
      rows.push(ids[order[p]]);
      starts.push(p);
    }
  }
  starts.push(order.length);
  const packed = new Int32Array(rows.length + starts.length + order.length);
  packed.set(rows, 0);
  packed.set(starts, rows.length);
  packed.set(order, rows.length + starts.length);
  return { packed, rows: rows.length };
}

/** Runs fn without recording gradients (evaluation). */
export function noGrad<T>(fn: () => T): T {
  const prev = gradEnabled;
  gradEnabled = false;
  try {
    return fn();
  } finally {
    gradEnabled = prev;
  }
}
