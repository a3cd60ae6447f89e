// Reverse-mode differentiation over the graph recorded by ops.
import { add } from './ops/elementwise';
import { shapesEqual } from './shape';
import { derived, noGrad, Tensor, tidy } from './tensor';

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
 * copied into it; leaves without one get `grad` set to a new tensor in the current scope. Returns the
 * leaves that received a gradient (a slot of any other leaf keeps its old contents).
 */
export function backward(output: Tensor, seed?: Tensor): Set<Tensor> {
  const leafGrads = gradients(output, seed);
  for (const [leaf, g] of leafGrads) {
    if (leaf.grad) leaf.backend.copy(leaf.grad.storage, g.storage);
    else leaf.grad = g;
  }
  return new Set(leafGrads.keys());
}

/** The gradient of `output` (seeded by `seed`, else a scalar's 1) with respect to every leaf it depends on. */
function gradients(output: Tensor, seed?: Tensor): Map<Tensor, Tensor> {
  if (!output.requiresGrad) throw new Error('backward: output does not depend on any tensor that requires grad');
  const be = output.backend;
  if (!seed) {
    if (output.size !== 1) throw new Error(`backward: output has shape [${output.shape}]; pass a seed gradient`);
    const s = be.alloc(1, 'f32');
    be.fill(s, 1);
    seed = derived(be, s, output.shape, [], 'seed', () => []);
  }
  const grads = new Map<number, Tensor>([[output.id, seed]]);
  const leafGrads = new Map<Tensor, Tensor>();
  const order = topoOrder(output);
  for (let i = order.length - 1; i >= 0; i--) {
    const t = order[i];
    const g = grads.get(t.id);
    if (!g) continue;
    if (!t.node) {
      leafGrads.set(t, g);
      continue;
    }
    const thunks = t.node.backward(g);
    t.node.inputs.forEach((inp, k) => {
      const thunk = thunks[k];
      if (!inp.requiresGrad || !thunk) return;
      const gi = thunk();
      if (!shapesEqual(gi.shape, inp.shape)) throw new Error(`${t.node!.name}: gradient shape [${gi.shape}] for input [${inp.shape}]`);
      const prev = grads.get(inp.id);
      grads.set(inp.id, prev ? add(prev, gi) : gi);
    });
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
