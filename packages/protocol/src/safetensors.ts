// safetensors codec (https://huggingface.co/docs/safetensors): u64 little-endian header length, a
// JSON header of { name: { dtype, shape, data_offsets } } plus optional string __metadata__, then
// raw little-endian tensor bytes. Files we write load as they are in PyTorch and numpy.

/** I64 is PyTorch's default integer (labels saved from a torch tensor). */
export type SafetensorsDType = 'F32' | 'F16' | 'I32' | 'I64' | 'U8';

export interface NamedTensor {
  dtype: SafetensorsDType;
  shape: number[];
  data: Uint8Array;
}

const BYTES: Record<SafetensorsDType, number> = { F32: 4, F16: 2, I32: 4, I64: 8, U8: 1 };
/** Header bigger than this is refused: a corrupt or hostile length must not allocate gigabytes. */
export const MAX_SAFETENSORS_HEADER = 16 * 1024 * 1024;

export class SafetensorsError extends Error {
  override name = 'SafetensorsError';
}

function bytesOf(t: Float32Array | Int32Array | Uint16Array | Uint8Array): Uint8Array {
  return new Uint8Array(t.buffer, t.byteOffset, t.byteLength);
}

export function f32Tensor(shape: number[], data: Float32Array): NamedTensor {
  return { dtype: 'F32', shape, data: bytesOf(data) };
}

export function encodeSafetensors(tensors: Record<string, NamedTensor>, metadata: Record<string, string> = {}): Uint8Array {
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length) header.__metadata__ = metadata;
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const expected = t.shape.reduce((a, d) => a * d, 1) * BYTES[t.dtype];
    if (t.data.byteLength !== expected) throw new SafetensorsError(`${name}: ${t.data.byteLength} bytes for ${t.dtype}[${t.shape}] (want ${expected})`);
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + expected] };
    offset += expected;
  }
  let json = new TextEncoder().encode(JSON.stringify(header));
  const padded = Math.ceil(json.length / 8) * 8; // align the data section to 8 bytes, padding with spaces
  if (padded !== json.length) {
    const p = new Uint8Array(padded).fill(0x20);
    p.set(json);
    json = p;
  }
  const out = new Uint8Array(8 + json.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  let pos = 8 + json.length;
  for (const t of Object.values(tensors)) {
    out.set(t.data, pos);
    pos += t.data.byteLength;
  }
  return out;
}

export interface DecodedSafetensors {
  tensors: Record<string, NamedTensor>;
  metadata: Record<string, string>;
}

/**
 * Parses and checks a file; throws SafetensorsError on anything malformed. As the format requires,
 * the tensors' byte ranges must tile the data section (no overlap, no holes), so the copies made
 * here never exceed the input's size, whatever the header claims. `views`: each tensor's data is a
 * view into `bytes` instead of a copy (the caller copies what it keeps; a server verifying a
 * checkpoint of hundreds of MiB must not hold it twice).
 */
export function decodeSafetensors(bytes: Uint8Array, { views = false } = {}): DecodedSafetensors {
  if (bytes.byteLength < 8) throw new SafetensorsError('file shorter than its 8-byte header length');
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  if (n > MAX_SAFETENSORS_HEADER || 8 + n > bytes.byteLength) throw new SafetensorsError(`header length ${n} does not fit the file (${bytes.byteLength} bytes)`);
  let header: Record<string, unknown>;
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  } catch {
    throw new SafetensorsError('header is not valid JSON');
  }
  if (!header || typeof header !== 'object' || Array.isArray(header)) throw new SafetensorsError('header is not a JSON object');
  const dataStart = 8 + n;
  const dataLen = bytes.byteLength - dataStart;
  const tensors: Record<string, NamedTensor> = {};
  let metadata: Record<string, string> = {};
  const ranges: { name: string; begin: number; end: number }[] = [];
  for (const [name, v] of Object.entries(header)) {
    // JSON.parse makes `__proto__` an own key; assigning it to a plain object would set a prototype instead.
    if (name === '__proto__') throw new SafetensorsError('a tensor or metadata key named __proto__ is not allowed');
    if (name === '__metadata__') {
      metadata = metadataOf(v);
      continue;
    }
    const e = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (!e || typeof e !== 'object' || typeof e.dtype !== 'string' || !Object.hasOwn(BYTES, e.dtype)) throw new SafetensorsError(`${name}: unsupported dtype ${JSON.stringify(e?.dtype) ?? 'none'}`);
    const dtype = e.dtype as SafetensorsDType;
    if (!Array.isArray(e.shape) || !e.shape.every((d) => Number.isInteger(d) && d >= 0)) throw new SafetensorsError(`${name}: bad shape`);
    const off = e.data_offsets;
    if (!Array.isArray(off) || off.length !== 2 || !off.every((o) => Number.isInteger(o) && o >= 0) || off[0] > off[1] || off[1] > dataLen) {
      throw new SafetensorsError(`${name}: data_offsets out of range`);
    }
    const shape = e.shape as number[];
    if ((off[1] - off[0]) !== shape.reduce((a, d) => a * d, 1) * BYTES[dtype]) throw new SafetensorsError(`${name}: byte length does not match ${dtype}[${shape}]`);
    ranges.push({ name, begin: off[0], end: off[1] });
  }
  // Overlapping ranges would let a small file decode into many copies of the same bytes.
  const byOffset = [...ranges].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let covered = 0;
  for (const r of byOffset) {
    if (r.begin !== covered) throw new SafetensorsError(`${r.name}: data_offsets [${r.begin}, ${r.end}] ${r.begin < covered ? 'overlap another tensor' : `leave a hole at ${covered}`}`);
    covered = r.end;
  }
  if (covered !== dataLen) throw new SafetensorsError(`tensors cover ${covered} of the ${dataLen} data bytes`);
  for (const r of ranges) {
    // In the header's order, as callers that re-encode expect.
    const { dtype, shape } = header[r.name] as { dtype: SafetensorsDType; shape: number[] };
    // Uint8Array's own slice copies; a Node Buffer's slice would be a view into a shared pool.
    const data = views ? bytes.subarray(dataStart + r.begin, dataStart + r.end) : Uint8Array.prototype.slice.call(bytes, dataStart + r.begin, dataStart + r.end);
    tensors[r.name] = { dtype, shape, data };
  }
  return { tensors, metadata };
}

/** `__metadata__` is a string → string map (safetensors' format); anything else is refused. */
function metadataOf(v: unknown): Record<string, string> {
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw new SafetensorsError('__metadata__ is not a JSON object');
  const out: Record<string, string> = {};
  for (const [k, s] of Object.entries(v)) {
    if (k === '__proto__') throw new SafetensorsError('a tensor or metadata key named __proto__ is not allowed');
    if (typeof s !== 'string') throw new SafetensorsError(`__metadata__.${k} is not a string`);
    out[k] = s;
  }
  return out;
}

/** Reads an F32 tensor's values (copied, so alignment never matters). */
export function f32Values(t: NamedTensor): Float32Array {
  if (t.dtype !== 'F32') throw new SafetensorsError(`expected F32, got ${t.dtype}`);
  return new Float32Array(Uint8Array.prototype.slice.call(t.data).buffer);
}
