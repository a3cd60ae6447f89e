// IEEE 754 half precision in plain TS: f32 → f16 rounds to nearest, ties to even (overflow → ±inf,
// NaN stays NaN); f16 → f32 is exact through a 64 Ki-entry table.

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** One f32 bit pattern → f16 bits. */
export function f32BitsToF16(b: number): number {
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  const mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 112; // rebias 127 → 15
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    const m = mant | 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    let r = m >>> shift;
    const rem = m & ((1 << shift) - 1);
    if (rem > half || (rem === half && r & 1)) r++;
    return sign | r;
  }
  let r = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && r & 1)) r++;
  return sign | r;
}

export function toF16(x: number): number {
  f32[0] = x;
  return f32BitsToF16(u32[0]);
}

let table: Float32Array | null = null;
/** f16 bits → f32 value, all 65536 of them. */
function f16Table(): Float32Array {
  if (table) return table;
  table = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >>> 10) & 0x1f;
    const mant = h & 0x3ff;
    table[h] = exp === 0 ? sign * mant * 2 ** -24 : exp === 0x1f ? (mant ? NaN : sign * Infinity) : sign * (1 + mant / 1024) * 2 ** (exp - 15);
  }
  return table;
}

export function fromF16(h: number): number {
  return f16Table()[h & 0xffff];
}

/** src[from, from+n) → f16 bits in dst[at, at+n). */
export function encodeF16(src: Float32Array, from: number, n: number, dst: Uint16Array, at = 0): void {
  const bits = new Uint32Array(src.buffer, src.byteOffset + from * 4, n);
  for (let i = 0; i < n; i++) dst[at + i] = f32BitsToF16(bits[i]);
}

/** f16 bits → f32 values in dst[at, at+n). */
export function decodeF16(src: Uint16Array, dst: Float32Array, at = 0): void {
  const t = f16Table();
  for (let i = 0; i < src.length; i++) dst[at + i] = t[src[i]];
}

/** dst[at+i] += f16(src[i]). */
export function addF16(src: Uint16Array, dst: Float32Array, at = 0): void {
  const t = f16Table();
  for (let i = 0; i < src.length; i++) dst[at + i] += t[src[i]];
}

/** Rounds x[from, from+n) to the nearest f16 value in place (what a receiver of the f16 wire sees). */
export function roundToF16(x: Float32Array, from = 0, n = x.length - from): void {
  const t = f16Table();
  const bits = new Uint32Array(x.buffer, x.byteOffset + from * 4, n);
  for (let i = 0; i < n; i++) x[from + i] = t[f32BitsToF16(bits[i])];
}
