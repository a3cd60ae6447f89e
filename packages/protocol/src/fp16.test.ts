import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeF16, encodeF16, fromF16, roundToF16, toF16 } from './fp16';

test('f32 → f16 rounds to nearest even, handles subnormals, overflow, inf and NaN', () => {
  const cases: [number, number][] = [
    [0, 0x0000], [-0, 0x8000], [1, 0x3c00], [-2, 0xc000], [65504, 0x7bff], [65520, 0x7c00], [65519.99, 0x7bff], [1e6, 0x7c00],
    [Infinity, 0x7c00], [-Infinity, 0xfc00], [2 ** -14, 0x0400], [2 ** -24, 0x0001], [2 ** -25, 0x0000], [2 ** -25 * 1.0001, 0x0001],
    [3 * 2 ** -25, 0x0002], // tie between 1 and 2 subnormal units → even (2)
    [1 + 2 ** -11, 0x3c00], // tie → even (down)
    [1 + 3 * 2 ** -11, 0x3c02], // tie → even (up)
    [1 + 2 ** -11 + 2 ** -20, 0x3c01],
    [0.1, 0x2e66], [-0.333251953125, 0xb555],
  ];
  for (const [x, h] of cases) assert.equal(toF16(x), h, `toF16(${x}) = 0x${toF16(x).toString(16)}, want 0x${h.toString(16)}`);
  assert.ok(Number.isNaN(fromF16(toF16(NaN))));
});

test('every f16 value survives f16 → f32 → f16, and rounding is to the nearest', () => {
  for (let h = 0; h < 65536; h++) {
    const x = fromF16(h);
    if (Number.isNaN(x)) continue;
    assert.equal(toF16(x), h === 0x8000 ? 0x8000 : h);
  }
  const xs = new Float32Array(10000).map((_, i) => Math.sin(i) * 2 ** ((i % 40) - 20));
  const r = Float32Array.from(xs);
  roundToF16(r);
  for (let i = 0; i < xs.length; i++) {
    const err = Math.abs(r[i] - xs[i]);
    const h = toF16(xs[i]);
    if ((h & 0x7c00) === 0x7c00) continue; // overflowed to ±inf, as IEEE rounding does past 65520
    // No other f16 is closer: neighbours are at least as far.
    for (const nb of [h - 1, h + 1]) if ((nb & 0x7c00) !== 0x7c00 && nb >= 0 && nb < 65536 && (nb & 0x8000) === (h & 0x8000)) assert.ok(Math.abs(fromF16(nb) - xs[i]) >= err);
  }
  const h = new Uint16Array(xs.length);
  encodeF16(xs, 0, xs.length, h);
  const back = new Float32Array(xs.length);
  decodeF16(h, back);
  assert.deepEqual(back, r);
});
