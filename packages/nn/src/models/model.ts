// What every model offers the trainer and the worker.
import type { Tensor } from '@tabfleet/tensor';
import type { ParamStore } from '../params';
import type { CnnPreset } from './cnn';
import type { MlpPreset } from './mlp';
import type { TransformerPreset } from './transformer';
import type { GptPreset } from './gpt';

export type ModelPreset = MlpPreset | CnnPreset | TransformerPreset | GptPreset;

export interface Model {
  readonly preset: ModelPreset;
  readonly store: ParamStore;
  /** 'f32' features (images) or 'i32' token ids. */
  readonly inputDType: 'f32' | 'i32';
  inputShape(batch: number): number[];
  /** Input batch → logits [rows, classes] (rows = B, or B·T for sequence models). */
  forward(x: Tensor): Tensor;
  /** Models that can recompute activations in backward (the GPT, per block) have this switch. */
  recompute?: boolean;
}
