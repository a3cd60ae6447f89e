// Creating tensors from host data.
import type { Backend } from './backend';
import { numel } from './shape';
import { groupIds, Tensor } from './tensor';

/**
 * `opts.groupIds`: i32 token ids that an embedding will look up; their positions grouped by id are
 * uploaded now too (an upload later in a step would split its command buffer).
 */
export function tensor(backend: Backend, data: Float32Array | Int32Array | number[], shape: number[], requiresGrad = false, opts: { groupIds?: boolean } = {}): Tensor {
  const arr = Array.isArray(data) ? Float32Array.from(data) : data;
  if (arr.length !== numel(shape)) throw new Error(`tensor: ${arr.length} values for shape [${shape}]`);
  const t = new Tensor(backend, backend.upload(arr), shape, arr instanceof Int32Array ? 'i32' : 'f32', requiresGrad);
  if (opts.groupIds && arr instanceof Int32Array) {
    const g = groupIds(arr);
    t.idGroups = { index: new Tensor(backend, backend.upload(g.packed), [g.packed.length], 'i32'), rows: g.rows };
  }
  return t;
}

export function zeros(backend: Backend, shape: number[], requiresGrad = false): Tensor {
  const s = backend.alloc(numel(shape), 'f32');
  backend.fill(s, 0);
  return new Tensor(backend, s, shape, 'f32', requiresGrad);
}
