// Elementwise unary and broadcasting binary ops, reductions and broadcasting helpers, with gradients.
import type { BinaryOp, ReduceOp, UnaryOp } from '../backend';
import { broadcastShapes, broadcastStrides, numel, shapesEqual } from '../shape';
import { derived, type GradThunks, type Tensor } from '../tensor';

function unary(op: UnaryOp, x: Tensor, alpha: number, grad: (dy: Tensor, y: Tensor) => Tensor): Tensor {
  const s = x.backend.unary(op, x.storage, x.size, alpha);
  const y: Tensor = derived(x.backend, s, x.shape, [x], op, (dy) => [() => grad(dy, y)]);
  return y;
}

/** y = −x. */
export const neg = (x: Tensor): Tensor => unary('neg', x, 0, (dy) => neg(dy));
export const exp = (x: Tensor): Tensor => unary('exp', x, 0, (dy, y) => mul(dy, y));
export const log = (x: Tensor): Tensor => unary('log', x, 0, (dy) => div(dy, x));
export const sqrt = (x: Tensor): Tensor => unary('sqrt', x, 0, (dy, y) => div(scale(dy, 0.5), y));
export const relu = (x: Tensor): Tensor => unary('relu', x, 0, (dy) => binary('reluGrad', dy, x));
export const gelu = (x: Tensor): Tensor => unary('gelu', x, 0, (dy) => binary('geluGrad', dy, x));
export const tanh = (x: Tensor): Tensor => unary('tanh', x, 0, (dy, y) => binary('tanhGrad', dy, y));
export const square = (x: Tensor): Tensor => unary('square', x, 0, (dy) => mul(dy, scale(x, 2)));
export const scale = (x: Tensor, alpha: number): Tensor => unary('scale', x, alpha, (dy) => scale(dy, alpha));
export const addScalar = (x: Tensor, alpha: number): Tensor => unary('addScalar', x, alpha, (dy) => dy);

/** Broadcasting binary op; gradient helpers (reluGrad…) are not differentiable themselves. */
export function binary(op: BinaryOp, a: Tensor, b: Tensor): Tensor {
  const outShape = broadcastShapes(a.shape, b.shape);
  const s = a.backend.binary(op, a.storage, b.storage, outShape, broadcastStrides(a.shape, outShape), broadcastStrides(b.shape, outShape));
  return derived(a.backend, s, outShape, [a, b], op, (dy) => binaryGrad(op, a, b, dy));
}

function binaryGrad(op: BinaryOp, a: Tensor, b: Tensor, dy: Tensor): GradThunks {
  switch (op) {
    case 'add': return [() => sumToShape(dy, a.shape), () => sumToShape(dy, b.shape)];
    case 'sub': return [() => sumToShape(dy, a.shape), () => sumToShape(neg(dy), b.shape)];
    case 'mul': return [() => sumToShape(mul(dy, b), a.shape), () => sumToShape(mul(dy, a), b.shape)];
    case 'div': return [() => sumToShape(div(dy, b), a.shape), () => sumToShape(neg(div(mul(dy, a), mul(b, b))), b.shape)];
    default: throw new Error(`${op} is a gradient helper and has no gradient of its own`);
  }
}

export const add = (a: Tensor, b: Tensor) => binary('add', a, b);
export const sub = (a: Tensor, b: Tensor) => binary('sub', a, b);
export const mul = (a: Tensor, b: Tensor) => binary('mul', a, b);
export const div = (a: Tensor, b: Tensor) => binary('div', a, b);

function reduceAxis(op: ReduceOp, x: Tensor, axis: number, keepDims: boolean): Tensor {
  const rank = x.shape.length;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) throw new Error(`axis ${axis} out of range for shape [${x.shape}]`);
  const outer = numel(x.shape.slice(0, axis));
  const inner = numel(x.shape.slice(axis + 1));
  const n = x.shape[axis];
  const kept = x.shape.map((d, i) => (i === axis ? 1 : d));
  const outShape = keepDims ? kept : x.shape.filter((_, i) => i !== axis);
  const s = x.backend.reduce(op, x.storage, outer, n, inner);
  return derived(x.backend, s, outShape, [x], `reduce_${op}`, (dy) => {
    if (op === 'max') throw new Error('max reduction has no gradient');
    const g = () => broadcastTo(dy.reshape(kept), x.shape);
    return [() => (op === 'mean' ? scale(g(), 1 / n) : g())];
  });
}

/** Sum over one axis, or over everything when axis is omitted (→ shape [1]). */
export function sum(x: Tensor, axis?: number, keepDims = false): Tensor {
  if (axis === undefined) return reduceAxis('sum', x.reshape([x.size]), 0, true);
  return reduceAxis('sum', x, axis, keepDims);
}
export function mean(x: Tensor, axis?: number, keepDims = false): Tensor {
  if (axis === undefined) return reduceAxis('mean', x.reshape([x.size]), 0, true);
  return reduceAxis('mean', x, axis, keepDims);
}
export function max(x: Tensor, axis: number, keepDims = false): Tensor {
  return reduceAxis('max', x, axis, keepDims);
}

/** Sums dims that were broadcast so that the result has `shape` (the gradient of broadcasting). */
export function sumToShape(t: Tensor, shape: readonly number[]): Tensor {
  if (shapesEqual(t.shape, shape)) return t;
  const lead = t.shape.length - shape.length;
  let cur = t;
  for (let i = 0; i < lead; i++) cur = sum(cur, 0);
  for (let i = 0; i < shape.length; i++) if (shape[i] === 1 && cur.shape[i] !== 1) cur = sum(cur, i, true);
  return cur.reshape([...shape]);
}

/** Broadcasts t to shape (materialized). */
export function broadcastTo(t: Tensor, shape: readonly number[]): Tensor {
  if (shapesEqual(t.shape, shape)) return t;
  const be = t.backend;
  const zero = be.alloc(1, 'f32');
  be.fill(zero, 0);
  const out = be.binary('add', t.storage, zero, [...shape], broadcastStrides(t.shape, shape), shape.map(() => 0));
  be.release(zero);
  return derived(be, out, shape, [t], 'broadcast', (dy) => [() => sumToShape(dy, t.shape)]);
}
