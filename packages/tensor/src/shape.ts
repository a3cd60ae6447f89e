// Shape helpers shared by ops and backends.

export function numel(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

export function contiguousStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

export function shapesEqual(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** Numpy broadcasting of two shapes; throws a clear error when they are incompatible. */
export function broadcastShapes(a: readonly number[], b: readonly number[]): number[] {
  const rank = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < rank; i++) {
    const da = a[a.length - rank + i] ?? 1;
    const db = b[b.length - rank + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) throw new Error(`shapes [${a}] and [${b}] do not broadcast`);
    out.push(Math.max(da, db));
  }
  return out;
}

/** Strides of `shape` read as if broadcast to `outShape` (0 on broadcast dims). */
export function broadcastStrides(shape: readonly number[], outShape: readonly number[]): number[] {
  const own = contiguousStrides(shape);
  const offset = outShape.length - shape.length;
  return outShape.map((d, i) => {
    const j = i - offset;
    if (j < 0) return 0;
    return shape[j] === 1 && d !== 1 ? 0 : own[j];
  });
}

export function assertShape(name: string, shape: readonly number[], expected: readonly (number | null)[]): void {
  const ok = shape.length === expected.length && expected.every((e, i) => e === null || e === shape[i]);
  if (!ok) throw new Error(`${name}: expected shape [${expected.map((e) => e ?? '*')}], got [${shape}]`);
}
