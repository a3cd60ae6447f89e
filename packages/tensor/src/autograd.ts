// Reverse-mode differentiation over the graph recorded by ops.
import { add } from './ops/elementwise';
import { shapesEqual } from './shape';
import type { Storage } from './backend';
import { derived, noGrad, releaseScoped, scopeSnapshot, Tensor, tidy } from './tensor';

function topoOrder(root: Tensor): Tensor[] {
  const order: Tensor[] = [];
  const seen = new Set<number>();
  // Iterative DFS: deep graphs (transformers) would overflow recursion.
  const stack: [Tensor, boolean][] = [[root, false]];
  while (stack.length) {
    const [t, expanded] = stack.pop()!;
    if (expanded) {
      order.push(t);
      continue;
    }
    if (seen.has(t.id)) continue;
    seen.add(t.id);
    stack.push([t, true]);
    for (const inp of t.node?.inputs ?? []) if (inp.requiresGrad && !seen.has(inp.id)) stack.push([inp, false]);
  }
  return order;
}

/**
 * Backpropagates from a scalar (or seeded) output. Leaves that have a `grad` slot get their gradient
 * copied into it as soon as it is complete, and the gradient is freed; leaves without one get `grad`
 * set to a new tensor in the current scope. Returns the leaves that received a gradient (a slot of
 * any other leaf keeps its old contents).
 */
export function backward(output: Tensor, seed?: Tensor): Set<Tensor> {
  const reached = new Set<Tensor>();
  gradients(output, seed, (leaf, g) => {
    reached.add(leaf);
    if (!leaf.grad) {
      leaf.grad = g;
      return true;
    }
    leaf.backend.copy(leaf.grad.storage, g.storage);
    return false;
  });
  return reached;
}

/**
 * The gradient of `output` (seeded by `seed`, else a scalar's 1) with respect to every leaf it depends on.
 *
 * Memory: a gradient is needed only until the node it belongs to has pushed it to its inputs, so each
 * is freed then, unless another pending gradient shares its storage (a reshape's view, an add's
 * pass-through). Only storage made by this backward is freed (what the scope held before is the
 * forward's, kept for the backward functions). Without that, every gradient of the pass (for GPT-2
 * small 1.3 GB of parameter gradients alone) stayed live until the pass's scope ended.
 * `onLeaf(leaf, g)`: a leaf's gradient is complete; it returns whether it keeps `g` (else g is freed).
 * Without it the leaves' gradients are returned.
 */
function gradients(output: Tensor, seed?: Tensor, onLeaf?: (leaf: Tensor, g: Tensor) => boolean): Map<Tensor, Tensor> {
  if (!output.requiresGrad) throw new Error('backward: output does not depend on any tensor that requires grad');
  const be = output.backend;
  const before = scopeSnapshot();
  if (!seed) {
    if (output.size !== 1) throw new Error(`backward: output has shape [${output.shape}]; pass a seed gradient`);
    const s = be.alloc(1, 'f32');
    be.fill(s, 1);
    seed = derived(be, s, output.shape, [], 'seed', () => []);
  }
  const grads = new Map<number, Tensor>();
  // How many pending gradients (and returned leaf gradients) use each storage.
  const uses = new Map<Storage, number>();
  const hold = (t: Tensor) => uses.set(t.storage, (uses.get(t.storage) ?? 0) + 1);
  const drop = (t: Tensor) => uses.set(t.storage, uses.get(t.storage)! - 1);
  const freeIfUnused = (t: Tensor) => {
    if (before && !uses.get(t.storage)) releaseScoped(t.storage, before);
  };
  grads.set(output.id, seed);
  hold(seed);
  const leafGrads = new Map<Tensor, Tensor>();
  const order = topoOrder(output);
  for (let i = order.length - 1; i >= 0; i--) {
    const t = order[i];
    const g = grads.get(t.id);
    if (!g) continue;
    grads.delete(t.id);
    if (!t.node) {
      if (!onLeaf) {
        leafGrads.set(t, g); // still held: returned
        continue;
      }
      if (onLeaf(t, g)) continue; // kept (the leaf's grad): stays held, so no alias of it is freed
      drop(g);
      freeIfUnused(g);
      continue;
    }
    const thunks = t.node.backward(g);
    // Freed only after every thunk of this node ran: a later thunk may read g or pass it through.
    const spent: Tensor[] = [g];
    t.node.inputs.forEach((inp, k) => {
      const thunk = thunks[k];
      if (!inp.requiresGrad || !thunk) return;
      const gi = thunk();
      if (!shapesEqual(gi.shape, inp.shape)) throw new Error(`${t.node!.name}: gradient shape [${gi.shape}] for input [${inp.shape}]`);
      const prev = grads.get(inp.id);
      if (!prev) {
        grads.set(inp.id, gi);
        hold(gi);
        return;
      }
      const sum = add(prev, gi);
      drop(prev);
      spent.push(prev, gi);
      grads.set(inp.id, sum);
      hold(sum);
    });
    drop(g);
    for (const x of spent) freeIfUnused(x);
  }
  return leafGrads;
}

/**
 * Activation recompute: `fn(x)` runs without keeping its intermediates (they go back to the pool as
 * soon as it returns); backward runs it again with gradients and backpropagates through that copy.
 * Memory then holds one block's activations at a time instead of every block's, for about one more
 * forward pass of compute. `params` are every parameter `fn` reads; their gradients flow out through
 * this node, so a parameter may also be used outside `fn` (tied weights). `fn` must be deterministic.
 */
export function checkpoint(fn: (x: Tensor) => Tensor, x: Tensor, params: readonly Tensor[]): Tensor {
  const y = noGrad(() => tidy(() => fn(x)));
  const inputs = [x, ...params];
  const recompute = (dy: Tensor): Tensor[] =>
    tidy(() => {
      // A leaf over x's storage, so the recomputed graph stops here.
      const xr = new Tensor(x.backend, x.storage, x.shape, x.dtype, x.requiresGrad, null, false);
      const leafGrads = gradients(fn(xr), dy);
      for (const leaf of leafGrads.keys()) {
        if (leaf !== xr && !params.includes(leaf)) throw new Error(`checkpoint: the function read a tensor [${leaf.shape}] that requires grad and is not among its ${params.length} params`);
      }
      // A parameter fn never reached gets zeros (its slot must not keep a stale gradient).
      return inputs.map((t, k) => leafGrads.get(k === 0 ? xr : t) ?? zerosLike(t));
    });
  const backwardFn = (dy: Tensor) => {
    let grads: Tensor[] | null = null; // one recompute serves every input's thunk
    return inputs.map((_, k) => () => (grads ??= recompute(dy))[k]);
  };
  return derived(x.backend, y.storage, y.shape, inputs, 'checkpoint', backwardFn, y.dtype, false);
}

function zerosLike(t: Tensor): Tensor {
  const s = t.backend.alloc(t.size, t.dtype);
  t.backend.fill(s, 0);
  return new Tensor(t.backend, s, t.shape, t.dtype);
}
