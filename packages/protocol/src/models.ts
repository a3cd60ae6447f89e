// The parameter layout of every job's model (names, shapes, offsets in the flat vector), so the
// server can check a volunteer's checkpoint without GPU code: right tensors, right shapes, finite
// values, and the digest (checkpointDigest) of the parameters and strategy state it holds. packages/nn
// builds the same layout (a test there keeps the two equal).
import { checkpointDigest } from './checksum';
import { ProtocolError } from './events';
import { TOKENIZER_VOCAB, type FixedPresetName, type GptConfig, type ModelPresetName, type Tokenizer } from './jobs';
import { gptLayout, PRESET_ARCHITECTURES, PRESET_LAYOUTS, type ModelArchitecture, type ParamLayout } from './layout';
import { fragmentOfSync, modelFragments } from './streaming';
import { decodeSafetensors, f32Values, type NamedTensor } from './safetensors';

export {
  PARAM_ALIGN_FLOATS, PRESET_ARCHITECTURES, PRESET_LAYOUTS, architectureLayout, cnnSides, gptLayout, parameterCount,
  type GptShape, type ModelArchitecture, type ParamEntry, type ParamLayout,
} from './layout';

/** What decides a job's model: a fixed preset's name, or the parts of a job spec that size it. */
export type ModelRef = FixedPresetName | { preset: ModelPresetName; gpt?: GptConfig; tokenizer?: Tokenizer };

const layoutCache = new Map<string, ParamLayout>();

/** The parameter layout of a job's model. */
export function layoutOf(ref: ModelRef): ParamLayout {
  if (typeof ref === 'string') return PRESET_LAYOUTS[ref];
  if (ref.preset !== 'gpt') return PRESET_LAYOUTS[ref.preset];
  if (!ref.gpt || !ref.tokenizer) throw new Error('a gpt model needs its gpt shape and tokenizer');
  const shape = { ...ref.gpt, vocab: TOKENIZER_VOCAB[ref.tokenizer] };
  const key = JSON.stringify(shape);
  let l = layoutCache.get(key);
  if (!l) layoutCache.set(key, (l = gptLayout(shape)));
  return l;
}

/** The architecture of a job's model: a fixed preset's, or a GPT of the job's shape with its tokenizer's vocabulary. */
export function architectureOf(ref: ModelRef): ModelArchitecture {
  if (typeof ref === 'string') return PRESET_ARCHITECTURES[ref];
  if (ref.preset !== 'gpt') return PRESET_ARCHITECTURES[ref.preset];
  if (!ref.gpt || !ref.tokenizer) throw new Error('a gpt model needs its gpt shape and tokenizer');
  return { kind: 'gpt', ...ref.gpt, vocab: TOKENIZER_VOCAB[ref.tokenizer] };
}

/** Floats in the job model's flat vector (padding included): every update's length, unless streaming. */
export const flatLengthOf = (ref: ModelRef) => layoutOf(ref).length;

/** A streaming job's model and fragment count (jobs.ts's `fragments`; 1 or absent: no fragments). */
export type StreamingRef = Exclude<ModelRef, string> & { fragments?: number };

/**
 * Values in the vector of the sync after `syncsBefore` committed ones: the model's flat length, or in
 * Streaming DiLoCo the fragment that sync carries (streaming.ts; no padding).
 */
export function syncVectorLength(spec: StreamingRef, syncsBefore: number): number {
  const count = spec.fragments ?? 1;
  if (count === 1) return flatLengthOf(spec);
  return modelFragments(layoutOf(spec), count)[fragmentOfSync(syncsBefore, count)].length;
}

/** The largest sync's vector: the whole model, or the largest fragment (a streaming job's peak). */
export function peakSyncVectorLength(spec: StreamingRef): number {
  const count = spec.fragments ?? 1;
  if (count === 1) return flatLengthOf(spec);
  return Math.max(...modelFragments(layoutOf(spec), count).map((f) => f.length));
}

const modelName = (ref: ModelRef) => (typeof ref === 'string' ? ref : ref.preset);

/**
 * Tensors a checkpoint may carry besides the parameters: sync-strategy state a joiner needs (DDP's
 * optimizer buffers, DiLoCo's outer momentum), each at most one flat vector long.
 */
const STATE_TENSOR = /^(ddp\.optimizer\.[A-Za-z0-9_.]{1,64}|diloco\.outer_momentum)$/;
const MAX_STATE_TENSORS = 4;
/** Room in a checkpoint for its JSON header (tensor names, shapes, offsets, metadata). */
const CHECKPOINT_HEADER_ROOM = 2 ** 20;

/** The most bytes a checkpoint verifyCheckpoint accepts for `model` can take: its parameters and every state tensor at full length. */
export function maxCheckpointBytes(model: ModelRef): number {
  return (1 + MAX_STATE_TENSORS) * 4 * flatLengthOf(model) + CHECKPOINT_HEADER_ROOM;
}

/**
 * Checks a checkpoint against the job's model: every parameter present as F32 with its shape, no
 * tensors but parameters and strategy state, every value finite. Returns the flat parameter vector
 * (padding zero, as the workers hold it) and the checkpointDigest of it and the state tensors; throws
 * ProtocolError('bad_tensor') otherwise.
 */
export function verifyCheckpoint(model: ModelRef, bytes: Uint8Array): { params: Float32Array; digest: string } {
  const { entries, length } = layoutOf(model);
  const preset = modelName(model);
  let tensors: Record<string, NamedTensor>;
  try {
    tensors = decodeSafetensors(bytes, { views: true }).tensors;
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
    // One copy, byte for byte into the flat vector (the view may sit at any alignment), then checked there.
    new Uint8Array(params.buffer, p.offset * 4, t.data.byteLength).set(t.data);
    assertFinite(p.name, params.subarray(p.offset, p.offset + t.data.byteLength / 4));
  }
  const extra = Object.keys(tensors).filter((name) => !expected.has(name));
  if (extra.length > MAX_STATE_TENSORS) throw new ProtocolError('bad_tensor', `checkpoint has ${extra.length} tensors besides the parameters (at most ${MAX_STATE_TENSORS})`);
  const state: Record<string, Float32Array> = {};
  for (const name of extra) {
    const t = tensors[name];
    if (!STATE_TENSOR.test(name)) throw new ProtocolError('bad_tensor', `checkpoint tensor ${JSON.stringify(name.slice(0, 80))} is not a parameter of the ${preset} model`);
    if (t.dtype !== 'F32' || t.shape.reduce((a, b) => a * b, 1) > length) throw new ProtocolError('bad_tensor', `checkpoint ${name} is ${t.dtype}[${t.shape}]: want F32 of at most ${length} values`);
    state[name] = finiteValues(name, t);
  }
  return { params, digest: checkpointDigest(params, state) };
}

function finiteValues(name: string, t: NamedTensor): Float32Array {
  return assertFinite(name, f32Values(t));
}

function assertFinite(name: string, v: Float32Array): Float32Array {
  for (let i = 0; i < v.length; i++) if (!Number.isFinite(v[i])) throw new ProtocolError('bad_tensor', `checkpoint tensor ${name} has a non-finite value at ${i}`);
  return v;
}
