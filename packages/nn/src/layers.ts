// Layers: each declares its parameters in a ParamStore (PyTorch names and layouts, so checkpoints
// load in PyTorch as they are) and applies the tensor ops.
import { conv2d, embedding, layerNorm, linear, type Activation, type Tensor } from '@tabfleet/tensor';
import type { Init, ParamStore } from './params';

export class Linear {
  private readonly w: () => Tensor;
  private readonly b: (() => Tensor) | null;
  /** `init` overrides the default He/Kaiming uniform (bound = gain·√(3 / fan_in); gain √2 suits ReLU). */
  constructor(store: ParamStore, name: string, readonly inF: number, readonly outF: number, opts: { bias?: boolean; gain?: number; init?: Init } = {}) {
    const init = opts.init ?? { kind: 'uniform', bound: (opts.gain ?? Math.SQRT2) * Math.sqrt(3 / inF) };
    this.w = store.declare(`${name}.weight`, [outF, inF], init);
    this.b = opts.bias === false ? null : store.declare(`${name}.bias`, [outF], { kind: 'const', value: 0 });
  }
  /** x: [B, in] → [B, out]. */
  forward(x: Tensor, activation: Activation = 'none'): Tensor {
    return linear(x, this.w(), this.b ? this.b() : null, activation);
  }
}

export class Conv2d {
  private readonly w: () => Tensor;
  private readonly b: () => Tensor;
  constructor(store: ParamStore, name: string, inC: number, outC: number, readonly k: number, readonly opts: { stride?: number; pad?: number } = {}) {
    const bound = Math.SQRT2 * Math.sqrt(3 / (inC * k * k));
    this.w = store.declare(`${name}.weight`, [outC, inC, k, k], { kind: 'uniform', bound });
    this.b = store.declare(`${name}.bias`, [outC], { kind: 'const', value: 0 });
  }
  /** x: [B, inC, H, W] → [B, outC, H', W']. */
  forward(x: Tensor, activation: Activation = 'none'): Tensor {
    return conv2d(x, this.w(), this.b(), { ...this.opts, activation });
  }
}

export class LayerNorm {
  private readonly g: () => Tensor;
  private readonly b: () => Tensor;
  constructor(store: ParamStore, name: string, dim: number) {
    this.g = store.declare(`${name}.weight`, [dim], { kind: 'const', value: 1 });
    this.b = store.declare(`${name}.bias`, [dim], { kind: 'const', value: 0 });
  }
  /** x: [..., dim] → same shape. */
  forward(x: Tensor): Tensor {
    return layerNorm(x, this.g(), this.b());
  }
}

export class Embedding {
  private readonly w: () => Tensor;
  constructor(store: ParamStore, name: string, count: number, dim: number) {
    this.w = store.declare(`${name}.weight`, [count, dim], { kind: 'normal', std: 0.02 });
  }
  /** ids: i32 [...] → [..., dim]. */
  forward(ids: Tensor): Tensor {
    return embedding(this.w(), ids);
  }
  /** The table [count, dim], e.g. for a head tied to it. */
  get weight(): Tensor {
    return this.w();
  }
}
