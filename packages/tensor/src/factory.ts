// Creating tensors from host data.
import type { Backend } from './backend';
import { numel } from './shape';
import { Tensor } from './tensor';

export function tensor(backend: Backend, data: Float32Array | Int32Array | number[], shape: number[], requiresGrad = false): Tensor {
  const arr = Array.isArray(data) ? Float32Array.from(data) : data;
  if (arr.length !== numel(shape)) throw new Error(`tensor: ${arr.length} values for shape [${shape}]`);
  return new Tensor(backend, backend.upload(arr), shape, arr instanceof Int32Array ? 'i32' : 'f32', requiresGrad);
}

export function zeros(backend: Backend, shape: number[], requiresGrad = false): Tensor {
  const s = backend.alloc(numel(shape), 'f32');
  backend.fill(s, 0);
  return new Tensor(backend, s, shape, 'f32', requiresGrad);
}
