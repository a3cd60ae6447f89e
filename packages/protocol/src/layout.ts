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

export const PRESET_LAYOUTS: Record<FixedPresetName, ParamLayout> = {
  'mlp-fashion': layout([...linearParams('layers.0', 256, 784), ...linearParams('layers.1', 10, 256)]),
  'cnn-fashion': layout([
    ['conv1.weight', [8, 1, 3, 3]], ['conv1.bias', [8]], ['conv2.weight', [16, 8, 3, 3]], ['conv2.bias', [16]],
    ...linearParams('fc1', 64, 784), ...linearParams('fc2', 10, 64),
  ]),
  'transformer-char': layout([
    ['tok_emb.weight', [32, 64]], ['pos_emb.weight', [64, 64]], ...transformerBlock(0, 64), ...transformerBlock(1, 64),
    ...normParams('ln_f', 64), ...linearParams('head', 32, 64),
  ]),
};
