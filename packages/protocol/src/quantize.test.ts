import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mulberry32 } from './random';
import { decodeQuantized, encodeQuantized, QUANT_BLOCK, quantizedBytes, QuantizedFeedback, QuantizeError, type QuantFormat } from './quantize';

function gaussian(n: number, seed: number, sigma = 1): Float32Array {
  const rand = mulberry32(seed);
  return Float32Array.from({ length: n }, () => sigma * Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand()));
}

/** Each value's worst rounding: half a step of the grid its magnitude lies on, in units of its block's scale. */
const halfStep = (format: QuantFormat, m: number) => (format === 'int8' ? 0.5 : m <= 2 ? 0.25 : m <= 4 ? 0.5 : 1);

test('sizes: a scale per block of 64, a byte per int8 value, a nibble per E2M1 value', () => {
  assert.equal(quantizedBytes(0, 'int8'), 0);
  assert.equal(quantizedBytes(64, 'int8'), 4 + 64);
  assert.equal(quantizedBytes(65, 'int8'), 8 + 65);
  assert.equal(quantizedBytes(65, 'e2m1'), 8 + 33);
  // Against f32: int8 at 3.76×, E2M1 at 7.11× fewer bytes for a big vector.
  assert.ok(Math.abs((4 * 1e6) / quantizedBytes(1e6, 'int8') - 3.765) < 0.01);
  assert.ok(Math.abs((4 * 1e6) / quantizedBytes(1e6, 'e2m1') - 7.111) < 0.01);
  assert.throws(() => quantizedBytes(10, 'int8', 3), (e: unknown) => e instanceof QuantizeError && e.code === 'bad_block');
  assert.throws(() => quantizedBytes(1.5, 'int8'), (e: unknown) => e instanceof QuantizeError && e.code === 'bad_length');
  assert.throws(() => quantizedBytes(4, 'int4' as QuantFormat), (e: unknown) => e instanceof QuantizeError && e.code === 'bad_format');
});

for (const format of ['int8', 'e2m1'] as const) {
  test(`${format}: every value comes back within half a step of its block's grid`, () => {
    // Blocks of very different magnitudes, an outlier, zeros and an odd count.
    const values = gaussian(1001, 7);
    for (let i = 0; i < 64; i++) values[i] *= 1e-6;
    values[300] = 1e4;
    values.fill(0, 500, 600);
    const bytes = encodeQuantized(values, format);
    assert.equal(bytes.byteLength, quantizedBytes(values.length, format));
    const back = decodeQuantized(bytes, values.length, format);
    const view = new DataView(bytes.buffer);
    for (let i = 0; i < values.length; i++) {
      const scale = view.getFloat32(Math.floor(i / QUANT_BLOCK) * 4, true);
      const m = Math.abs(values[i]) / scale;
      assert.ok(Math.abs(back[i] - values[i]) <= halfStep(format, m) * scale * (1 + 1e-6) + 1e-30, `${i}: ${values[i]} → ${back[i]} (scale ${scale})`);
    }
    // The largest magnitude of each block is exact (up to its scale's f32 rounding), zeros stay zeros.
    assert.ok(Math.abs(back[300] - 1e4) / 1e4 < 1e-6);
    assert.ok(back.subarray(512, 576).every((v) => v === 0));
  });

  test(`${format}: decoding refuses a wrong length, a bad scale and a bad code, and every value it returns is finite`, () => {
    const values = gaussian(129, 3);
    const good = encodeQuantized(values, format);
    const refuses = (bytes: Uint8Array, n: number, code: string) =>
      assert.throws(() => decodeQuantized(bytes, n, format), (e: unknown) => e instanceof QuantizeError && e.code === code, code);
    refuses(good.subarray(1), 129, 'bad_length');
    refuses(good, 128, 'bad_length');
    for (const scale of [-1, Number.NaN, Number.POSITIVE_INFINITY, 3e38]) {
      const bad = good.slice();
      new DataView(bad.buffer).setFloat32(4, scale, true);
      refuses(bad, 129, 'bad_scale');
    }
    const bad = good.slice();
    if (format === 'int8') bad[12 + 5] = 0x80;
    else bad[bad.length - 1] |= 0x10; // the pad nibble after 129 values
    refuses(bad, 129, 'bad_code');
    // The largest scale it accepts still gives finite values.
    const edge = good.slice();
    new DataView(edge.buffer).setFloat32(0, 3.4e38 / (format === 'int8' ? 127 : 6), true);
    assert.ok(decodeQuantized(edge, 129, format).every(Number.isFinite));
  });
}

test('encoding refuses a value that is not finite', () => {
  assert.throws(() => encodeQuantized(Float32Array.of(1, Number.NaN), 'int8'), (e: unknown) => e instanceof QuantizeError && e.code === 'bad_value');
  assert.throws(() => encodeQuantized(Float32Array.of(Number.NEGATIVE_INFINITY), 'e2m1'), (e: unknown) => e instanceof QuantizeError && e.code === 'bad_value');
});

test('error feedback: what was sent over many rounds sums to what went in, to within one rounding', () => {
  for (const format of ['int8', 'e2m1'] as const) {
    const n = 4096;
    const feedback = new QuantizedFeedback(n, format);
    const sumIn = new Float64Array(n);
    const sumSent = new Float64Array(n);
    for (let round = 0; round < 50; round++) {
      // A small steady drift under noise, as a pseudo-gradient's mean direction under its batch noise.
      const x = gaussian(n, 100 + round, 1);
      for (let i = 0; i < n; i++) x[i] += 0.05;
      const { sent } = feedback.encode(x);
      for (let i = 0; i < n; i++) {
        sumIn[i] += x[i];
        sumSent[i] += sent[i];
      }
    }
    let worst = 0;
    for (let i = 0; i < n; i++) worst = Math.max(worst, Math.abs(sumSent[i] - sumIn[i]));
    // The difference of the sums is exactly the residual, which one rounding of the corrected input bounds.
    assert.ok(Math.abs(worst - feedback.pending()) < 1e-3, `sums differ by ${worst}, residual ${feedback.pending()}`);
    assert.ok(worst < (format === 'int8' ? 0.1 : 2), `${format}: sums differ by up to ${worst}`);
    const restored = new QuantizedFeedback(n, format);
    restored.restore(feedback.state());
    assert.equal(restored.pending(), feedback.pending());
  }
  assert.throws(() => new QuantizedFeedback(4, 'int8').encode(new Float32Array(5)), QuantizeError);
});

for (const format of ['int8', 'e2m1'] as const) {
  test(`${format}: encoding what was decoded gives the same bytes (a group re-sends decoded parts to validators)`, () => {
    const rand = mulberry32(11);
    for (let trial = 0; trial < 200; trial++) {
      // Magnitudes over 60 binades, so every kind of scale comes up; a zero block too.
      const values = gaussian(64 * 8 + 17, 100 + trial, Math.exp((rand() - 0.5) * 60));
      values.fill(0, 64, 128);
      const bytes = encodeQuantized(values, format);
      const again = encodeQuantized(decodeQuantized(bytes, values.length, format), format);
      assert.deepEqual(again, bytes, `trial ${trial}`);
    }
  });

  test(`${format}: a block-aligned slice of an encoding is the encoding of that slice`, () => {
    const values = gaussian(64 * 10 + 5, 3);
    const whole = decodeQuantized(encodeQuantized(values, format), values.length, format);
    for (const [from, to] of [[64 * 3, 64 * 7], [64 * 7, values.length]]) {
      const slice = values.subarray(from, to);
      assert.deepEqual(decodeQuantized(encodeQuantized(slice, format), slice.length, format), whole.subarray(from, to));
    }
  });
}
