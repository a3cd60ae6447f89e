// The parameter layout of every model preset (names, shapes, offsets in the flat vector), so the
// server can check a volunteer's checkpoint without GPU code: right tensors, right shapes, finite
// values, and the digest (modelDigest) of the parameters it holds. packages/nn builds the same layout (a test
// there keeps the two equal).
import { modelDigest } from './checksum';
import { ProtocolError } from './events';
import type { MODEL_PRESETS } from './jobs';
import { decodeSafetensors, f32Values, type NamedTensor } from './safetensors';

type Preset = (typeof MODEL_PRESETS)[number];

export interface ParamEntry {
  name: string;
  shape: number[];
  /** Where it starts in the flat vector (a multiple of PARAM_ALIGN_FLOATS). */
  offset: number;
  size: number;
}

/** Offsets are multiples of 64 floats (256 bytes): WebGPU's storage-binding offset alignment. */
export const PARAM_ALIGN_FLOATS = 64;

function layout(params: [string, number[]][]): { entries: ParamEntry[]; length: number } {
  let length = 0;
  const entries = params.map(([name, shape]) => {
    const offset = Math.ceil(length / PARAM_ALIGN_FLOATS) * PARAM_ALIGN_FLOATS;
    const size = shape.reduce((a, b) => a * b, 1);
    length = offset + size;
    return { name, shape, offset, size };
  });
  return { entries, length };
}

const linear = (name: string, out: number, inp: number): [string, number[]][] => [[`${name}.weight`, [out, inp]], [`${name}.bias`, [out]]];
const norm = (name: string, dim: number): [string, number[]][] => [[`${name}.weight`, [dim]], [`${name}.bias`, [dim]]];

function transformerBlock(i: number, d: number): [string, number[]][] {
  const b = `blocks.${i}`;
  return [
    ...norm(`${b}.ln1`, d), ...linear(`${b}.attn.q`, d, d), ...linear(`${b}.attn.k`, d, d), ...linear(`${b}.attn.v`, d, d),
    ...linear(`${b}.attn.proj`, d, d), ...norm(`${b}.ln2`, d), ...linear(`${b}.mlp.fc`, 4 * d, d), ...linear(`${b}.mlp.proj`, d, 4 * d),
  ];
}

export const PRESET_LAYOUTS: Record<Preset, { entries: ParamEntry[]; length: number }> = {
  'mlp-fashion': layout([...linear('layers.0', 256, 784), ...linear('layers.1', 10, 256)]),
  'cnn-fashion': layout([
    ['conv1.weight', [8, 1, 3, 3]], ['conv1.bias', [8]], ['conv2.weight', [16, 8, 3, 3]], ['conv2.bias', [16]],
    ...linear('fc1', 64, 784), ...linear('fc2', 10, 64),
  ]),
  'transformer-char': layout([
    ['tok_emb.weight', [32, 64]], ['pos_emb.weight', [64, 64]], ...transformerBlock(0, 64), ...transformerBlock(1, 64),
    ...norm('ln_f', 64), ...linear('head', 32, 64),
  ]),
};

/**
 * Tensors a checkpoint may carry besides the parameters: sync-strategy state a joiner needs (DDP's
 * optimizer buffers, DiLoCo's outer momentum), each at most one flat vector long.
 */
const STATE_TENSOR = /^(ddp\.optimizer\.[A-Za-z0-9_.]{1,64}|diloco\.outer_momentum)$/;
const MAX_STATE_TENSORS = 4;

/**
 * Checks a checkpoint against the job's model: every parameter present as F32 with its shape, no
 * tensors but parameters and strategy state, every value finite. Returns the flat parameter vector
 * (padding zero, as the workers hold it) and their digest; throws ProtocolError('bad_tensor') otherwise.
 */
export function verifyCheckpoint(preset: Preset, bytes: Uint8Array): { params: Float32Array; digest: string } {
  const { entries, length } = PRESET_LAYOUTS[preset];
  let tensors: Record<string, NamedTensor>;
  try {
    tensors = decodeSafetensors(bytes).tensors;
  } catch (e) {
    throw new ProtocolError('bad_tensor', `checkpoint is not valid safetensors: ${(e as Error).message}`);
  }
  const params = new Float32Array(length);
  const expected = new Set<string>();
  for (const p of entries) {
    expected.add(p.name);
    const t = tensors[p.name];
    if (!t) throw new ProtocolError('bad_tensor', `checkpoint lacks ${p.name} of the ${preset} model`);
    if (t.dtype !== 'F32' || t.shape.join() !== p.shape.join()) throw new ProtocolError('bad_tensor', `checkpoint ${p.name} is ${t.dtype}[${t.shape}], the ${preset} model has F32[${p.shape}]`);
    params.set(finiteValues(p.name, t), p.offset);
  }
  const extra = Object.keys(tensors).filter((name) => !expected.has(name));
  if (extra.length > MAX_STATE_TENSORS) throw new ProtocolError('bad_tensor', `checkpoint has ${extra.length} tensors besides the parameters (at most ${MAX_STATE_TENSORS})`);
  for (const name of extra) {
    const t = tensors[name];
    if (!STATE_TENSOR.test(name)) throw new ProtocolError('bad_tensor', `checkpoint tensor ${JSON.stringify(name.slice(0, 80))} is not a parameter of the ${preset} model`);
    if (t.dtype !== 'F32' || t.shape.reduce((a, b) => a * b, 1) > length) throw new ProtocolError('bad_tensor', `checkpoint ${name} is ${t.dtype}[${t.shape}]: want F32 of at most ${length} values`);
    finiteValues(name, t);
  }
  return { params, digest: modelDigest(params) };
}

function finiteValues(name: string, t: NamedTensor): Float32Array {
  const v = f32Values(t);
  for (let i = 0; i < v.length; i++) if (!Number.isFinite(v[i])) throw new ProtocolError('bad_tensor', `checkpoint tensor ${name} has a non-finite value at ${i}`);
  return v;
}
