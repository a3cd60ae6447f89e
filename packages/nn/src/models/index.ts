import type { Backend } from '@tabfleet/tensor';
import { Cnn } from './cnn';
import { Mlp } from './mlp';
import type { Model, ModelPreset } from './model';
import { Transformer } from './transformer';

export type { Model, ModelPreset } from './model';
export { Mlp, type MlpPreset } from './mlp';
export { Cnn, type CnnPreset } from './cnn';
export { Transformer, type TransformerPreset } from './transformer';

/** The presets jobs name. */
export const PRESETS = {
  'mlp-fashion': { kind: 'mlp', sizes: [784, 256, 10] },
  'cnn-fashion': { kind: 'cnn', inChannels: 1, imageSize: 28, channels: [8, 16], hidden: 64, classes: 10 },
  'transformer-char': { kind: 'transformer', vocab: 32, context: 64, dim: 64, heads: 4, layers: 2 },
} as const satisfies Record<string, ModelPreset>;

export type PresetName = keyof typeof PRESETS;

/** Builds a model and materializes its parameters on the backend with a seeded init. */
export function createModel(preset: ModelPreset, backend: Backend, seed = 1): Model {
  const model = preset.kind === 'mlp' ? new Mlp(preset) : preset.kind === 'cnn' ? new Cnn(preset) : new Transformer(preset);
  model.store.materialize(backend, seed);
  return model;
}
