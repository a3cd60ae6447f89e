// Multi-layer perceptron: Linear+ReLU layers, linear output. x: [B, sizes[0]] → logits [B, sizes.at(-1)].
import type { Tensor } from '@tabfleet/tensor';
import { Linear } from '../layers';
import { ParamStore } from '../params';
import type { Model } from './model';

export interface MlpPreset {
  kind: 'mlp';
  sizes: number[];
}

export class Mlp implements Model {
  readonly store = new ParamStore();
  readonly inputDType = 'f32' as const;
  private readonly layers: Linear[];

  constructor(readonly preset: MlpPreset) {
    if (preset.sizes.length < 2) throw new Error('an MLP needs at least input and output sizes');
    this.layers = preset.sizes.slice(1).map((out, i) => new Linear(this.store, `layers.${i}`, preset.sizes[i], out, { gain: i === preset.sizes.length - 2 ? 1 : Math.SQRT2 }));
  }

  inputShape(batch: number): number[] {
    return [batch, this.preset.sizes[0]];
  }

  forward(x: Tensor): Tensor {
    let h = x.reshape([x.shape[0], -1]);
    this.layers.forEach((l, i) => {
      h = l.forward(h, i < this.layers.length - 1 ? 'relu' : 'none');
    });
    return h;
  }
}
