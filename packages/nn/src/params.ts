// The flat parameter store: every parameter lives in one buffer and every gradient in another, in a
// fixed order described by a manifest (name, shape, offset). Sync strategies work on these flat
// vectors; layers see ordinary tensors that are views into them.
import { decodeSafetensors, encodeSafetensors, f32Tensor, f32Values, Rng } from '@tabfleet/protocol';
import { keepForever, numel, Tensor, type Backend, type Storage } from '@tabfleet/tensor';

/** Offsets are multiples of 64 floats (256 bytes): WebGPU's storage-binding offset alignment. */
export const PARAM_ALIGN = 64;

export type Init =
  | { kind: 'uniform'; bound: number }
  | { kind: 'normal'; std: number }
  | { kind: 'const'; value: number };

export interface ManifestEntry {
  name: string;
  shape: number[];
  offset: number;
  size: number;
}

interface Pending extends ManifestEntry {
  init: Init;
}

export class ParamStore {
  private readonly pending: Pending[] = [];
  private readonly byName = new Map<string, Tensor>();
  private flat: Storage | null = null;
  private flatGrad: Storage | null = null;
  private backendRef: Backend | null = null;
  /** Total elements including alignment padding. */
  length = 0;

  /** Declares a parameter; returns a thunk resolving to its tensor once the store is materialized. */
  declare(name: string, shape: number[], init: Init): () => Tensor {
    if (this.flat) throw new Error('parameters must be declared before the store is materialized');
    if (this.pending.some((p) => p.name === name)) throw new Error(`duplicate parameter ${name}`);
    const size = numel(shape);
    const offset = Math.ceil(this.length / PARAM_ALIGN) * PARAM_ALIGN;
    this.pending.push({ name, shape, offset, size, init });
    this.length = offset + size;
    return () => this.get(name);
  }

  get manifest(): ManifestEntry[] {
    return this.pending.map(({ name, shape, offset, size }) => ({ name, shape, offset, size }));
  }

  get(name: string): Tensor {
    const t = this.byName.get(name);
    if (!t) throw new Error(this.flat ? `no parameter ${name}` : 'parameter store not materialized yet');
    return t;
  }

  get backend(): Backend {
    if (!this.backendRef) throw new Error('parameter store not materialized yet');
    return this.backendRef;
  }

  /** The flat parameter and gradient vectors (padding included, always zero in gradients). */
  get flatParams(): Storage {
    if (!this.flat) throw new Error('parameter store not materialized yet');
    return this.flat;
  }
  get flatGrads(): Storage {
    if (!this.flatGrad) throw new Error('parameter store not materialized yet');
    return this.flatGrad;
  }

  /** Host-side initial values: identical on every backend for a given seed. */
  initialValues(seed: number): Float32Array {
    const rng = new Rng(seed);
    const values = new Float32Array(this.length);
    for (const p of this.pending) {
      const v = values.subarray(p.offset, p.offset + p.size);
      const init = p.init;
      for (let i = 0; i < p.size; i++) {
        v[i] = init.kind === 'uniform' ? rng.uniform(-init.bound, init.bound) : init.kind === 'normal' ? rng.normal() * init.std : init.value;
      }
    }
    return values;
  }

  materialize(backend: Backend, seed: number): void {
    if (this.flat) throw new Error('parameter store already materialized');
    this.backendRef = backend;
    this.flat = backend.upload(this.initialValues(seed));
    this.flatGrad = backend.alloc(this.length, 'f32');
    backend.fill(this.flatGrad, 0);
    for (const p of this.pending) {
      const t = keepForever(new Tensor(backend, backend.view(this.flat, p.offset, p.size), p.shape, 'f32', true));
      t.grad = keepForever(new Tensor(backend, backend.view(this.flatGrad, p.offset, p.size), p.shape, 'f32', false));
      this.byName.set(p.name, t);
    }
  }

  zeroGrads(): void {
    this.backend.fill(this.flatGrads, 0);
  }

  /** Zeroes the gradient slots of parameters that `backward` did not reach (usually none). */
  zeroGradsExcept(reached: Set<Tensor>): void {
    for (const t of this.byName.values()) if (!reached.has(t)) this.backend.fill(t.grad!.storage, 0);
  }

  async readFlat(): Promise<Float32Array> {
    return (await this.backend.read(this.flatParams, 'f32')) as Float32Array;
  }

  writeFlat(values: Float32Array): void {
    if (values.length !== this.length) throw new Error(`flat parameters: expected ${this.length} values, got ${values.length}`);
    this.backend.write(this.flatParams, values);
  }

  async toSafetensors(metadata: Record<string, string> = {}): Promise<Uint8Array> {
    return this.safetensorsOf(await this.readFlat(), metadata);
  }

  /**
   * A flat vector of this store's layout (a model held apart from the parameters) as toSafetensors
   * writes it, with `extra` flat tensors after the parameters (a strategy's state), encoded once.
   */
  safetensorsOf(flat: Float32Array, metadata: Record<string, string> = {}, extra: Record<string, Float32Array> = {}): Uint8Array {
    if (flat.length !== this.length) throw new Error(`a flat vector of ${flat.length} values for a model of ${this.length}`);
    const tensors = Object.fromEntries(this.pending.map((p) => [p.name, f32Tensor(p.shape, flat.subarray(p.offset, p.offset + p.size))]));
    for (const [name, values] of Object.entries(extra)) tensors[name] = f32Tensor([values.length], values);
    return encodeSafetensors(tensors, metadata);
  }

  /** Loads values saved by toSafetensors; every parameter must be present with its shape. */
  loadSafetensors(bytes: Uint8Array): Record<string, string> {
    const { tensors, metadata } = decodeSafetensors(bytes);
    const flat = new Float32Array(this.length);
    for (const p of this.pending) {
      const t = tensors[p.name];
      if (!t) throw new Error(`checkpoint has no tensor ${p.name}`);
      if (t.shape.join() !== p.shape.join()) throw new Error(`checkpoint ${p.name} has shape [${t.shape}], model wants [${p.shape}]`);
      flat.set(f32Values(t), p.offset);
    }
    this.writeFlat(flat);
    return metadata;
  }
}
