// Binary frames of the collective layer (ring allreduce, allgather, broadcast, sparse allgather,
// group averaging) as they travel over WebRTC data channels. One frame is one data-channel message
// of at most 64 KiB: a fixed 28-byte little-endian header, then the payload. No DOM, no Node globals.
//
//   offset  type  field
//   0       u8    version   FRAME_VERSION (2)
//   1       u8    kind      FrameKind: which collective (or abort / raw / ping)
//   2       u8    dtype     FrameDType: how the payload is laid out
//   3       u8    flags     bit 0 FLAG_LAST: last chunk of its segment; other bits must be 0
//   4       u32   job       job id (a 32-bit hash when the job id is a string)
//   8       u32   round     sync round the frame belongs to
//   12      u32   op        sequence number of the collective within the ring (0, 1, …)
//   16      u16   step      ring step within the op (allreduce: 0..2N−3)
//   18      u16   segment   segment index (which member's slice)
//   20      u32   chunk     chunk index within the segment
//   24      u32   length    payload bytes (= frame bytes − 28)
//   28      …     payload

/** 2: sparse payloads carry gap-coded indices (1 had plain u32 indices). */
export const FRAME_VERSION = 2;
export const FRAME_HEADER_BYTES = 28;
/** A whole frame, header included: Chromium refuses data-channel messages over 256 KiB, we stay far below. */
export const MAX_FRAME_BYTES = 64 * 1024;
export const MAX_FRAME_PAYLOAD = MAX_FRAME_BYTES - FRAME_HEADER_BYTES;
export const FLAG_LAST = 1;

export const FrameKind = {
  allreduce: 1,
  allgather: 2,
  broadcast: 3,
  sparseAllgather: 4,
  /** A member gave up on an op; payload is UTF-8 JSON { code, message }. Forwarded around the ring. */
  abort: 5,
  /** Raw throughput probes (benchmarks); never reduced. */
  raw: 6,
  /** Acknowledges a raw stream (benchmarks). */
  ack: 7,
  /** Group averaging: a member's contribution to one part, sent to the part's owner (segment = owner). */
  groupScatter: 8,
  /** Group averaging: an owner's aggregate of its part, sent to every member (segment = owner). */
  groupGather: 9,
  /** Group validation: a member's contribution to one part, sent to the part's validator (segment = part). */
  groupValidate: 10,
  /** Round-trip probe between two linked members (chunk = the prober's nonce, no payload); never routed to a ring. */
  ping: 11,
  /** The answer to a ping: the same nonce, sent straight back. */
  pong: 12,
  /** Block-quantized vectors (q8 / q4 dtype) forwarded round the ring; every member decodes and averages them in ring order. */
  quantizedAllgather: 13,
  /** A joiner asks a linked member for the job's model (job = the job's hash, round = the sync's seq; no payload). */
  modelRequest: 14,
  /** The model as a checkpoint, in order (job, round as asked; chunk = index; FLAG_LAST on the last chunk; u8). */
  modelData: 15,
  /** The member will not serve that model (job, round as asked); payload UTF-8 JSON { message }. */
  modelRefuse: 16,
} as const;
export type FrameKindName = keyof typeof FrameKind;
export type FrameKindCode = (typeof FrameKind)[FrameKindName];

export const FrameDType = {
  /** Opaque bytes (abort reasons, raw probes). */
  u8: 0,
  f32: 1,
  /** IEEE half, round-to-nearest-even from f32. */
  f16: 2,
  u32: 3,
  /** Sparse pairs: u32 n, n f32 values, n LEB128 indices (first absolute, then gaps); see collective's sparse-codec. */
  idx_f32: 4,
  /** The same with n f16 values. */
  idx_f16: 5,
  /** Block-quantized int8: f32 scales per block, then a byte per value (protocol's quantize.ts); cut anywhere. */
  q8: 6,
  /** Block-quantized 4-bit floats (E2M1): f32 scales per block, then a nibble per value; cut anywhere. */
  q4: 7,
} as const;
export type FrameDTypeName = keyof typeof FrameDType;
export type FrameDTypeCode = (typeof FrameDType)[FrameDTypeName];

/** Bytes per element of each dtype (sparse payloads are variable-length, checked when decoded). */
export const FRAME_DTYPE_BYTES: Record<FrameDTypeName, number> = { u8: 1, f32: 4, f16: 2, u32: 4, idx_f32: 1, idx_f16: 1, q8: 1, q4: 1 };

const KIND_NAMES = new Map<number, FrameKindName>(Object.entries(FrameKind).map(([k, v]) => [v, k as FrameKindName]));
const DTYPE_NAMES = new Map<number, FrameDTypeName>(Object.entries(FrameDType).map(([k, v]) => [v, k as FrameDTypeName]));

export interface FrameHeader {
  kind: FrameKindName;
  dtype: FrameDTypeName;
  /** FLAG_LAST marks the last chunk of a segment. */
  flags: number;
  job: number;
  round: number;
  op: number;
  step: number;
  segment: number;
  chunk: number;
}

export interface Frame extends FrameHeader {
  /** A view into the frame's bytes (not a copy). */
  payload: Uint8Array;
}

export type FrameErrorCode = 'too_short' | 'too_long' | 'bad_version' | 'bad_kind' | 'bad_dtype' | 'bad_flags' | 'bad_length' | 'bad_alignment' | 'bad_field';

export class FrameError extends Error {
  override name = 'FrameError';
  constructor(readonly code: FrameErrorCode, message: string) {
    super(`${code}: ${message}`);
  }
}

/** Elements of `dtype` that fit in one frame's payload. */
export function maxChunkElements(dtype: FrameDTypeName): number {
  return Math.floor(MAX_FRAME_PAYLOAD / FRAME_DTYPE_BYTES[dtype]);
}

function checkUint(name: string, v: number, bits: 16 | 32): void {
  const max = bits === 16 ? 0xffff : 0xffffffff;
  if (!Number.isInteger(v) || v < 0 || v > max) throw new FrameError('bad_field', `${name} must be an integer in [0, ${max}], got ${v}`);
}

/** Writes the header into a fresh frame with room for `payloadBytes`; the caller fills bytes 28… */
export function allocFrame(h: FrameHeader, payloadBytes: number): Uint8Array {
  const kind = FrameKind[h.kind];
  const dtype = FrameDType[h.dtype];
  if (kind === undefined) throw new FrameError('bad_kind', `unknown frame kind ${String(h.kind)}`);
  if (dtype === undefined) throw new FrameError('bad_dtype', `unknown frame dtype ${String(h.dtype)}`);
  if (h.flags & ~FLAG_LAST) throw new FrameError('bad_flags', `unknown flag bits 0x${h.flags.toString(16)}`);
  if (payloadBytes > MAX_FRAME_PAYLOAD) throw new FrameError('too_long', `payload of ${payloadBytes} bytes exceeds ${MAX_FRAME_PAYLOAD}`);
  if (payloadBytes % FRAME_DTYPE_BYTES[h.dtype] !== 0) throw new FrameError('bad_alignment', `${payloadBytes} bytes is not a whole number of ${h.dtype} elements`);
  checkUint('job', h.job, 32);
  checkUint('round', h.round, 32);
  checkUint('op', h.op, 32);
  checkUint('step', h.step, 16);
  checkUint('segment', h.segment, 16);
  checkUint('chunk', h.chunk, 32);
  const out = new Uint8Array(FRAME_HEADER_BYTES + payloadBytes);
  const v = new DataView(out.buffer);
  v.setUint8(0, FRAME_VERSION);
  v.setUint8(1, kind);
  v.setUint8(2, dtype);
  v.setUint8(3, h.flags);
  v.setUint32(4, h.job, true);
  v.setUint32(8, h.round, true);
  v.setUint32(12, h.op, true);
  v.setUint16(16, h.step, true);
  v.setUint16(18, h.segment, true);
  v.setUint32(20, h.chunk, true);
  v.setUint32(24, payloadBytes, true);
  return out;
}

export function encodeFrame(h: FrameHeader, payload: Uint8Array): Uint8Array {
  const out = allocFrame(h, payload.byteLength);
  out.set(payload, FRAME_HEADER_BYTES);
  return out;
}

/** Parses and validates a frame; throws FrameError on anything malformed. The payload is a view, not a copy. */
export function decodeFrame(bytes: Uint8Array): Frame {
  if (!(bytes instanceof Uint8Array)) throw new FrameError('too_short', 'a frame must be a Uint8Array');
  if (bytes.byteLength < FRAME_HEADER_BYTES) throw new FrameError('too_short', `${bytes.byteLength} bytes is shorter than the ${FRAME_HEADER_BYTES}-byte header`);
  if (bytes.byteLength > MAX_FRAME_BYTES) throw new FrameError('too_long', `${bytes.byteLength} bytes exceeds the ${MAX_FRAME_BYTES}-byte frame limit`);
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = v.getUint8(0);
  if (version !== FRAME_VERSION) throw new FrameError('bad_version', `frame version ${version}, expected ${FRAME_VERSION}`);
  const kind = KIND_NAMES.get(v.getUint8(1));
  if (!kind) throw new FrameError('bad_kind', `unknown frame kind ${v.getUint8(1)}`);
  const dtype = DTYPE_NAMES.get(v.getUint8(2));
  if (!dtype) throw new FrameError('bad_dtype', `unknown frame dtype ${v.getUint8(2)}`);
  const flags = v.getUint8(3);
  if (flags & ~FLAG_LAST) throw new FrameError('bad_flags', `unknown flag bits 0x${flags.toString(16)}`);
  const length = v.getUint32(24, true);
  if (length !== bytes.byteLength - FRAME_HEADER_BYTES) {
    throw new FrameError('bad_length', `header says ${length} payload bytes, frame carries ${bytes.byteLength - FRAME_HEADER_BYTES}`);
  }
  if (length % FRAME_DTYPE_BYTES[dtype] !== 0) throw new FrameError('bad_alignment', `${length} payload bytes is not a whole number of ${dtype} elements`);
  return {
    kind,
    dtype,
    flags,
    job: v.getUint32(4, true),
    round: v.getUint32(8, true),
    op: v.getUint32(12, true),
    step: v.getUint16(16, true),
    segment: v.getUint16(18, true),
    chunk: v.getUint32(20, true),
    payload: bytes.subarray(FRAME_HEADER_BYTES),
  };
}

/** FNV-1a, 32 bits: the `job` field for string job ids. */
export function jobHash(id: string | number): number {
  if (typeof id === 'number') {
    checkUint('job', id, 32);
    return id;
  }
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    h ^= id.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}
