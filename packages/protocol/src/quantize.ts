// Block-quantized vectors, the wire form of pseudo-gradients at 8 and 4 bits (issue 38): int8 as
// INTELLECT-1 all-reduces them, and 4-bit floats (E2M1: magnitudes 0, ½, 1, 1½, 2, 3, 4, 6) as
// Streaming DiLoCo sends outer gradients. Each block of `block` values carries its own f32 scale (its
// largest magnitude ÷ the format's largest code), so one outlier costs only its block's precision.
//
// Layout of n values in blocks of B (little-endian):
//   ceil(n / B) f32 scales, then the codes: n bytes (int8, −127…127) or ceil(n / 2) bytes (E2M1,
//   low nibble first; bit 3 the sign, bits 0–2 the magnitude's index; an odd n pads a zero nibble).
// Decoding refuses (QuantizeError) a wrong length, a scale that is negative, not finite or so large that
// a code would overflow f32, int8's unused −128 and a non-zero pad: every value it returns is finite and
// at most its block's scale × the largest code. What a peer can still do is send large valid values:
// the robust rule, which sees the decoded vector, is what bounds that. A block whose largest magnitude
// is below about 127 (int8) or 6 (E2M1) × f32's least subnormal has a zero scale and comes back as zeros.

export const QUANT_FORMATS = ['int8', 'e2m1'] as const;
export type QuantFormat = (typeof QUANT_FORMATS)[number];
/** Values per scale (64: a scale is 1/16 of an int8 block's bytes, 1/8 of an E2M1 block's). */
export const QUANT_BLOCK = 64;

/** E2M1's magnitudes by code, and the midpoints between neighbours (round to nearest, ties up). */
const E2M1_VALUES = [0, 0.5, 1, 1.5, 2, 3, 4, 6];
const E2M1_MIDPOINTS = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5];
const LARGEST_CODE: Record<QuantFormat, number> = { int8: 127, e2m1: 6 };

export type QuantizeErrorCode = 'bad_format' | 'bad_block' | 'bad_length' | 'bad_scale' | 'bad_code' | 'bad_value';

export class QuantizeError extends Error {
  constructor(readonly code: QuantizeErrorCode, message: string) {
    super(message);
    this.name = 'QuantizeError';
  }
}

function checkShape(n: number, format: QuantFormat, block: number): void {
  if (!QUANT_FORMATS.includes(format)) throw new QuantizeError('bad_format', `unknown quantized format ${String(format)}`);
  if (!Number.isInteger(block) || block < 2 || block % 2 !== 0 || block > 1 << 16) throw new QuantizeError('bad_block', `block ${block}: want an even whole number from 2 to 65536`);
  if (!Number.isInteger(n) || n < 0) throw new QuantizeError('bad_length', `${n} values: want a whole number ≥ 0`);
}

/** Bytes that n values take in `format` (scales and codes). */
export function quantizedBytes(n: number, format: QuantFormat, block = QUANT_BLOCK): number {
  checkShape(n, format, block);
  return Math.ceil(n / block) * 4 + (format === 'int8' ? n : Math.ceil(n / 2));
}

function e2m1Code(x: number, inverseScale: number): number {
  const m = Math.abs(x) * inverseScale;
  let index = 0;
  while (index < E2M1_MIDPOINTS.length && m >= E2M1_MIDPOINTS[index]) index++;
  return index === 0 ? 0 : index | (x < 0 ? 8 : 0);
}

/** `values` in `format`; every value must be finite (a NaN would poison its whole block). */
export function encodeQuantized(values: Float32Array, format: QuantFormat, block = QUANT_BLOCK): Uint8Array {
  const n = values.length;
  const out = new Uint8Array(quantizedBytes(n, format, block));
  const blocks = Math.ceil(n / block);
  const scales = new DataView(out.buffer);
  const codesAt = blocks * 4;
  for (let b = 0; b < blocks; b++) {
    const from = b * block;
    const to = Math.min(n, from + block);
    let largest = 0;
    for (let i = from; i < to; i++) {
      const a = Math.abs(values[i]);
      if (!Number.isFinite(a)) throw new QuantizeError('bad_value', `value ${values[i]} at ${i} is not finite`);
      if (a > largest) largest = a;
    }
    // The scale as it goes on the wire (f32), so codes round against what the receiver multiplies by.
    let scale = Math.fround(largest / LARGEST_CODE[format]);
    // Near f32's largest value, scale × largest code can round past it: step the scale down one ulp.
    if (!Number.isFinite(Math.fround(scale * LARGEST_CODE[format]))) scale = Math.fround(scale * (1 - 2 ** -23));
    scales.setFloat32(b * 4, scale, true);
    const inverse = scale > 0 ? 1 / scale : 0;
    for (let i = from; i < to; i++) {
      if (format === 'int8') {
        out[codesAt + i] = Math.max(-127, Math.min(127, Math.round(values[i] * inverse))) & 0xff;
      } else {
        out[codesAt + (i >> 1)] |= e2m1Code(values[i], inverse) << ((i & 1) * 4);
      }
    }
  }
  return out;
}

/** n values back from `bytes` (into `out` when given). */
export function decodeQuantized(bytes: Uint8Array, n: number, format: QuantFormat, block = QUANT_BLOCK, into?: Float32Array): Float32Array {
  const expected = quantizedBytes(n, format, block);
  const out = into ?? new Float32Array(n);
  if (bytes.byteLength !== expected) throw new QuantizeError('bad_length', `${bytes.byteLength} bytes for ${n} ${format} values in blocks of ${block}: want ${expected}`);
  if (out.length < n) throw new QuantizeError('bad_length', `output holds ${out.length} values, want ${n}`);
  const blocks = Math.ceil(n / block);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const codesAt = blocks * 4;
  for (let b = 0; b < blocks; b++) {
    const scale = view.getFloat32(b * 4, true);
    if (!(scale >= 0) || !Number.isFinite(Math.fround(scale * LARGEST_CODE[format]))) {
      throw new QuantizeError('bad_scale', `block ${b}'s scale ${scale}: want a finite scale ≥ 0 whose largest code stays finite`);
    }
    const to = Math.min(n, (b + 1) * block);
    for (let i = b * block; i < to; i++) {
      if (format === 'int8') {
        const code = (bytes[codesAt + i] << 24) >> 24;
        if (code === -128) throw new QuantizeError('bad_code', `int8 code −128 at ${i} (codes are −127…127)`);
        out[i] = code * scale;
      } else {
        const code = (bytes[codesAt + (i >> 1)] >> ((i & 1) * 4)) & 0xf;
        const magnitude = E2M1_VALUES[code & 7] * scale;
        out[i] = code & 8 ? -magnitude : magnitude;
      }
    }
  }
  if (format === 'e2m1' && n % 2 === 1 && bytes[codesAt + (n >> 1)] >> 4 !== 0) throw new QuantizeError('bad_code', 'the pad nibble after an odd count is not zero');
  return out;
}

/**
 * Error feedback (as DGC keeps its residual): what quantization dropped from one vector is added to the
 * next before it is quantized, so the sum of what was sent follows the sum of the inputs to within one
 * rounding, however coarse the format.
 */
export class QuantizedFeedback {
  private readonly residual: Float32Array;

  constructor(readonly length: number, readonly format: QuantFormat, readonly block = QUANT_BLOCK) {
    this.residual = new Float32Array(length);
  }

  /** Quantizes `values` + the residual; `sent` gets what the receivers will decode. */
  encode(values: Float32Array, sent = new Float32Array(this.length)): { bytes: Uint8Array; sent: Float32Array } {
    if (values.length !== this.length) throw new QuantizeError('bad_length', `${values.length} values for feedback of ${this.length}`);
    const corrected = new Float32Array(this.length);
    for (let i = 0; i < this.length; i++) corrected[i] = values[i] + this.residual[i];
    const bytes = encodeQuantized(corrected, this.format, this.block);
    decodeQuantized(bytes, this.length, this.format, this.block, sent);
    for (let i = 0; i < this.length; i++) this.residual[i] = corrected[i] - sent[i];
    return { bytes, sent };
  }

  /** The residual's largest magnitude (what has not been sent yet). */
  pending(): number {
    let largest = 0;
    for (const r of this.residual) largest = Math.max(largest, Math.abs(r));
    return largest;
  }

  /** A copy of the residual (for checkpoints), and its restore. */
  state(): Float32Array {
    return this.residual.slice();
  }

  restore(residual: Float32Array): void {
    if (residual.length !== this.length) throw new QuantizeError('bad_length', `${residual.length} residual values for feedback of ${this.length}`);
    this.residual.set(residual);
  }
}
