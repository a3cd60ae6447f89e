// Reverse-mode differentiation over the graph recorded by ops.
import { add } from './ops/elementwise';
import { shapesEqual } from './shape';
import { derived, type Tensor } from './tensor';

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
  if (!output.requiresGrad) throw new Error('backward: output does not depend on any tensor that requires grad');
  const be = output.backend;
  if (!seed) {
    if (output.size !== 1) throw new Error(`backward: output has shape [${output.shape}]; pass a seed gradient`);
    const s = be.alloc(1, 'f32');
    be.fill(s, 1);
    seed = derived(be, s, output.shape, [], 'seed', () => []);
  }
  const grads = new Map<number, Tensor>([[output.id, seed]]);
  const reached = new Set<Tensor>();
  const order = topoOrder(output);
  for (let i = order.length - 1; i >= 0; i--) {
    const t = order[i];
    const g = grads.get(t.id);
    if (!g) continue;
    if (!t.node) {
      assignLeafGrad(t, g);
      reached.add(t);
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
  return reached;
}

function assignLeafGrad(leaf: Tensor, g: Tensor): void {
  if (leaf.grad) leaf.backend.copy(leaf.grad.storage, g.storage);
  else leaf.grad = g;
}
