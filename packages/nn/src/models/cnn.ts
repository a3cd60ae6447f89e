// Small CNN for 28×28 images: [conv3×3 → ReLU → maxpool2] × 2 → Linear+ReLU → Linear.
// x: [B, 1, 28, 28] (or [B, 784]) → logits [B, classes].
import { maxPool2d, type Tensor } from '@tabfleet/tensor';
import { Conv2d, Linear } from '../layers';
import { ParamStore } from '../params';
import type { Model } from './model';

export interface CnnPreset {
  kind: 'cnn';
  inChannels: number;
  imageSize: number;
  channels: [number, number];
  hidden: number;
  classes: number;
}

export class Cnn implements Model {
  readonly store = new ParamStore();
  readonly inputDType = 'f32' as const;
  private readonly conv1: Conv2d;
  private readonly conv2: Conv2d;
  private readonly fc1: Linear;
  private readonly fc2: Linear;
  private readonly flat: number;

  constructor(readonly preset: CnnPreset) {
    const [c1, c2] = preset.channels;
    this.conv1 = new Conv2d(this.store, 'conv1', preset.inChannels, c1, 3, { pad: 1 });
    this.conv2 = new Conv2d(this.store, 'conv2', c1, c2, 3, { pad: 1 });
    const side = Math.floor(Math.floor(preset.imageSize / 2) / 2);
    this.flat = c2 * side * side;
    this.fc1 = new Linear(this.store, 'fc1', this.flat, preset.hidden);
    this.fc2 = new Linear(this.store, 'fc2', preset.hidden, preset.classes, { gain: 1 });
  }

  inputShape(batch: number): number[] {
    return [batch, this.preset.inChannels, this.preset.imageSize, this.preset.imageSize];
  }

  forward(x: Tensor): Tensor {
    const B = x.shape[0];
    let h = x.reshape(this.inputShape(B));
    h = maxPool2d(this.conv1.forward(h, 'relu'), 2);
    h = maxPool2d(this.conv2.forward(h, 'relu'), 2);
    h = this.fc1.forward(h.reshape([B, this.flat]), 'relu');
    return this.fc2.forward(h);
  }
}
