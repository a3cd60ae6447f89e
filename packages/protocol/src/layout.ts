// Flat parameter layouts: names, shapes and offsets of a model's tensors in the one vector workers
// train and average. packages/nn declares parameters in the same order (a test keeps them equal).
import type { FixedPresetName } from './jobs';

export interface ParamEntry {
  name: string;
  shape: number[];
  /** Where it starts in the flat vector (a multiple of PARAM_ALIGN_FLOATS). */
  offset: number;
  size: number;
}

export interface ParamLayout {
  entries: ParamEntry[];
  /** Floats in the flat vector, alignment padding included. */
  length: number;
}

/** Offsets are multiples of 64 floats (256 bytes): WebGPU's storage-binding offset alignment. */
export const PARAM_ALIGN_FLOATS = 64;

export function layout(params: [string, number[]][]): ParamLayout {
  let length = 0;
  const entries = params.map(([name, shape]) => {
    const offset = Math.ceil(length / PARAM_ALIGN_FLOATS) * PARAM_ALIGN_FLOATS;
    const size = shape.reduce((a, b) => a * b, 1);
    length = offset + size;
    return { name, shape, offset, size };
  });
  return { entries, length };
}

/** Parameters without the padding. */
export const parameterCount = (l: ParamLayout) => l.entries.reduce((a, e) => a + e.size, 0);

export const linearParams = (name: string, out: number, inp: number): [string, number[]][] => [[`${name}.weight`, [out, inp]], [`${name}.bias`, [out]]];
export const normParams = (name: string, dim: number): [string, number[]][] => [[`${name}.weight`, [dim]], [`${name}.bias`, [dim]]];

export interface GptShape {
  layers: number;
  heads: number;
  width: number;
  context: number;
  vocab: number;
}

/**
 * A GPT's parameters with nanoGPT's names and order (`GPT.state_dict()` of karpathy/nanoGPT with
 * bias=True), so `safetensors.torch.load_file` gives a state dict its model loads. The head is tied to
 * the token embedding, as in nanoGPT and GPT-2, and is not stored: set
 * `sd['lm_head.weight'] = sd['transformer.wte.weight']` before `load_state_dict`.
 */
export function gptLayout(g: GptShape): ParamLayout {
  const W = g.width;
  const block = (i: number): [string, number[]][] => {
    const b = `transformer.h.${i}`;
    return [
      ...normParams(`${b}.ln_1`, W), ...linearParams(`${b}.attn.c_attn`, 3 * W, W), ...linearParams(`${b}.attn.c_proj`, W, W),
      ...normParams(`${b}.ln_2`, W), ...linearParams(`${b}.mlp.c_fc`, 4 * W, W), ...linearParams(`${b}.mlp.c_proj`, W, 4 * W),
    ];
  };
  return layout([
    ['transformer.wte.weight', [g.vocab, W]], ['transformer.wpe.weight', [g.context, W]],
    ...Array.from({ length: g.layers }, (_, i) => block(i)).flat(),
    ...normParams('transformer.ln_f', W),
  ]);
}

function transformerBlock(i: number, d: number): [string, number[]][] {
  const b = `blocks.${i}`;
  return [
    ...normParams(`${b}.ln1`, d), ...linearParams(`${b}.attn.q`, d, d), ...linearParams(`${b}.attn.k`, d, d), ...linearParams(`${b}.attn.v`, d, d),
    ...linearParams(`${b}.attn.proj`, d, d), ...normParams(`${b}.ln2`, d), ...linearParams(`${b}.mlp.fc`, 4 * d, d), ...linearParams(`${b}.mlp.proj`, d, 4 * d),
  ];
}

/**
 * A model's architecture, as packages/nn's presets give it (nn's ModelPreset has these fields; a test
 * there keeps PRESET_ARCHITECTURES equal to its PRESETS): enough to lay out its parameters and to
 * replay the tensors a training step makes (memory-estimate.ts).
 */
export type ModelArchitecture =
  /** Linear+ReLU layers, linear output: sizes[0] inputs → sizes.at(-1) logits. */
  | { kind: 'mlp'; sizes: readonly number[] }
  /** [conv3×3 (pad 1) → ReLU → maxpool2] × 2 → Linear+ReLU → Linear, on square images. */
  | { kind: 'cnn'; inChannels: number; imageSize: number; channels: readonly [number, number]; hidden: number; classes: number }
  /** Pre-norm character transformer: separate q, k, v projections, an untied head. */
  | { kind: 'transformer'; vocab: number; context: number; dim: number; heads: number; layers: number }
  /** nanoGPT: fused q|k|v projection, head tied to the token embedding. */
  | ({ kind: 'gpt' } & GptShape);

/** The fixed presets' architectures (packages/nn's PRESETS). */
export const PRESET_ARCHITECTURES: Record<FixedPresetName, ModelArchitecture> = {
  'mlp-fashion': { kind: 'mlp', sizes: [784, 256, 10] },
  'cnn-fashion': { kind: 'cnn', inChannels: 1, imageSize: 28, channels: [8, 16], hidden: 64, classes: 10 },
  'transformer-char': { kind: 'transformer', vocab: 32, context: 64, dim: 64, heads: 4, layers: 2 },
};

/** The CNN's feature map sides: after conv1 (same padding), pool1 (= conv2's), pool2. */
export function cnnSides(a: { imageSize: number }): [number, number, number] {
  const pooled = Math.floor(a.imageSize / 2);
  return [a.imageSize, pooled, Math.floor(pooled / 2)];
}

/** The parameters of any architecture, in the order packages/nn declares them. */
export function architectureLayout(a: ModelArchitecture): ParamLayout {
  switch (a.kind) {
    case 'mlp':
      return layout(a.sizes.slice(1).flatMap((out, i) => linearParams(`layers.${i}`, out, a.sizes[i])));
    case 'cnn': {
      const [c1, c2] = a.channels, flat = c2 * cnnSides(a)[2] ** 2;
      return layout([
        ['conv1.weight', [c1, a.inChannels, 3, 3]], ['conv1.bias', [c1]], ['conv2.weight', [c2, c1, 3, 3]], ['conv2.bias', [c2]],
        ...linearParams('fc1', a.hidden, flat), ...linearParams('fc2', a.classes, a.hidden),
      ]);
    }
    case 'transformer':
      return layout([
        ['tok_emb.weight', [a.vocab, a.dim]], ['pos_emb.weight', [a.context, a.dim]], ...Array.from({ length: a.layers }, (_, i) => transformerBlock(i, a.dim)).flat(),
        ...normParams('ln_f', a.dim), ...linearParams('head', a.vocab, a.dim),
      ]);
    case 'gpt':
      return gptLayout(a);
  }
}

export const PRESET_LAYOUTS: Record<FixedPresetName, ParamLayout> = {
  'mlp-fashion': architectureLayout(PRESET_ARCHITECTURES['mlp-fashion']),
  'cnn-fashion': architectureLayout(PRESET_ARCHITECTURES['cnn-fashion']),
  'transformer-char': architectureLayout(PRESET_ARCHITECTURES['transformer-char']),
};
