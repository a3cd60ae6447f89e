import { TOKENIZER_VOCAB, type ModelRef } from '@tabfleet/protocol';
import type { Backend } from '@tabfleet/tensor';
import { Cnn } from './cnn';
import { Mlp } from './mlp';
import type { Model, ModelPreset } from './model';
import { Transformer } from './transformer';
import { Gpt } from './gpt';

export type { Model, ModelPreset } from './model';
export { Mlp, type MlpPreset } from './mlp';
export { Cnn, type CnnPreset } from './cnn';
export { Transformer, type TransformerPreset } from './transformer';
export { Gpt, type GptPreset } from './gpt';

/** The presets jobs name. */
export const PRESETS = {
  'mlp-fashion': { kind: 'mlp', sizes: [784, 256, 10] },
  'cnn-fashion': { kind: 'cnn', inChannels: 1, imageSize: 28, channels: [8, 16], hidden: 64, classes: 10 },
  'transformer-char': { kind: 'transformer', vocab: 32, context: 64, dim: 64, heads: 4, layers: 2 },
} as const satisfies Record<string, ModelPreset>;

export type PresetName = keyof typeof PRESETS;

/** Builds a model and materializes its parameters on the backend with a seeded init. */
export function createModel(preset: ModelPreset, backend: Backend, seed = 1): Model {
  const model = preset.kind === 'mlp' ? new Mlp(preset) : preset.kind === 'cnn' ? new Cnn(preset) : preset.kind === 'gpt' ? new Gpt(preset) : new Transformer(preset);
  model.store.materialize(backend, seed);
  return model;
}

/** The model a job names: a fixed preset, or a GPT of the job's shape with its tokenizer's vocabulary. */
export function presetOf(ref: ModelRef): ModelPreset {
  if (typeof ref === 'string') return PRESETS[ref];
  if (ref.preset !== 'gpt') return PRESETS[ref.preset];
  if (!ref.gpt || !ref.tokenizer) throw new Error('a gpt job needs its gpt shape and tokenizer');
  return { kind: 'gpt', ...ref.gpt, vocab: TOKENIZER_VOCAB[ref.tokenizer] };
}

/** Sequence models' context (tokens per example), null for image models. */
export function contextOf(preset: ModelPreset): number | null {
  return preset.kind === 'transformer' || preset.kind === 'gpt' ? preset.context : null;
}
