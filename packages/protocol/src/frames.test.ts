import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  FLAG_LAST, FRAME_HEADER_BYTES, FRAME_VERSION, FrameError, MAX_FRAME_BYTES, MAX_FRAME_PAYLOAD, allocFrame, decodeFrame, encodeFrame, jobHash,
  maxChunkElements, type FrameErrorCode, type FrameHeader,
} from './frames';

const header: FrameHeader = { kind: 'allreduce', dtype: 'f32', flags: FLAG_LAST, job: 0xdeadbeef, round: 7, op: 3, step: 5, segment: 2, chunk: 70000 };

test('a frame round-trips every header field and its payload', () => {
  const payload = new Uint8Array(new Float32Array([1.5, -2, 3e-8]).buffer);
  const bytes = encodeFrame(header, payload);
  assert.equal(bytes.byteLength, FRAME_HEADER_BYTES + 12);
  const f = decodeFrame(bytes);
  const { payload: p, ...h } = f;
  assert.deepEqual(h, header);
  assert.deepEqual([...new Float32Array(p.slice().buffer)], [1.5, -2, new Float32Array([3e-8])[0]]);
});

test('decoding a frame inside a larger buffer reads from its offset, payload is a view', () => {
  const inner = encodeFrame({ ...header, dtype: 'u8', flags: 0 }, new Uint8Array([9, 8, 7]));
  const outer = new Uint8Array(inner.byteLength + 10);
  outer.set(inner, 5);
  const f = decodeFrame(outer.subarray(5, 5 + inner.byteLength));
  assert.deepEqual([...f.payload], [9, 8, 7]);
  assert.equal(f.payload.buffer, outer.buffer);
});

test('the largest frame is 64 KiB and chunk sizes fill it', () => {
  for (const dt of ['f32', 'f16', 'u32', 'idx_f32', 'idx_f16', 'u8', 'q8', 'q4'] as const) {
    const bytesPer = { f32: 4, f16: 2, u32: 4, idx_f32: 1, idx_f16: 1, u8: 1, q8: 1, q4: 1 }[dt];
    const n = maxChunkElements(dt);
    assert.ok(n * bytesPer <= MAX_FRAME_PAYLOAD && (n + 1) * bytesPer > MAX_FRAME_PAYLOAD, dt);
    const f = allocFrame({ ...header, dtype: dt }, n * bytesPer);
    assert.ok(f.byteLength <= MAX_FRAME_BYTES);
    assert.equal(decodeFrame(f).payload.byteLength, n * bytesPer);
  }
  assert.throws(() => allocFrame({ ...header, dtype: 'u8' }, MAX_FRAME_PAYLOAD + 1), (e: FrameError) => e.code === 'too_long');
});

test('encoding refuses bad fields', () => {
  const cases: [Partial<FrameHeader>, number, FrameErrorCode][] = [
    [{ kind: 'nope' as never }, 0, 'bad_kind'],
    [{ dtype: 'f64' as never }, 0, 'bad_dtype'],
    [{ flags: 2 }, 0, 'bad_flags'],
    [{ step: 65536 }, 0, 'bad_field'],
    [{ round: -1 }, 0, 'bad_field'],
    [{ chunk: 1.5 }, 0, 'bad_field'],
    [{ job: 2 ** 32 }, 0, 'bad_field'],
    [{ dtype: 'f32' }, 6, 'bad_alignment'],
  ];
  for (const [patch, bytes, code] of cases) {
    assert.throws(() => allocFrame({ ...header, ...patch }, bytes), (e: unknown) => e instanceof FrameError && e.code === code, JSON.stringify(patch));
  }
});

/** A valid f32 frame with two elements, then patched by each malformed case. */
function valid(): Uint8Array {
  return encodeFrame({ ...header, flags: 0 }, new Uint8Array(8));
}
function patched(f: (b: Uint8Array, v: DataView) => Uint8Array | void): Uint8Array {
  const b = valid();
  return f(b, new DataView(b.buffer)) ?? b;
}

test('decoding rejects malformed input with a typed error', () => {
  const cases: [string, Uint8Array, FrameErrorCode][] = [
    ['empty', new Uint8Array(0), 'too_short'],
    ['header cut short', valid().subarray(0, FRAME_HEADER_BYTES - 1), 'too_short'],
    ['over 64 KiB', (() => { const b = new Uint8Array(MAX_FRAME_BYTES + 1); b.set(valid()); return b; })(), 'too_long'],
    ['version 0', patched((b) => { b[0] = 0; }), 'bad_version'],
    ['another version', patched((b) => { b[0] = FRAME_VERSION + 1; }), 'bad_version'],
    ['kind 0', patched((b) => { b[1] = 0; }), 'bad_kind'],
    ['kind 99', patched((b) => { b[1] = 99; }), 'bad_kind'],
    ['dtype 200', patched((b) => { b[2] = 200; }), 'bad_dtype'],
    ['reserved flag bit', patched((b) => { b[3] = 0x80; }), 'bad_flags'],
    ['length larger than the frame', patched((_, v) => v.setUint32(24, 12, true)), 'bad_length'],
    ['length smaller than the frame', patched((_, v) => v.setUint32(24, 4, true)), 'bad_length'],
    ['trailing garbage', (() => { const b = new Uint8Array(valid().byteLength + 1); b.set(valid()); return b; })(), 'bad_length'],
    ['payload cut short', valid().subarray(0, FRAME_HEADER_BYTES + 4), 'bad_length'],
    ['f32 payload of 6 bytes', (() => { const b = encodeFrame({ ...header, dtype: 'u8' }, new Uint8Array(6)); b[2] = 1; return b; })(), 'bad_alignment'],
    ['f16 payload of 7 bytes', (() => { const b = encodeFrame({ ...header, dtype: 'u8' }, new Uint8Array(7)); b[2] = 2; return b; })(), 'bad_alignment'],
  ];
  for (const [name, bytes, code] of cases) {
    assert.throws(() => decodeFrame(bytes), (e: unknown) => e instanceof FrameError && e.code === code && e.message.length > code.length + 2, name);
  }
  assert.throws(() => decodeFrame('hello' as never), FrameError);
});

test('jobHash: numbers pass through, strings hash to a stable u32', () => {
  assert.equal(jobHash(42), 42);
  assert.equal(jobHash('job-1'), jobHash('job-1'));
  assert.notEqual(jobHash('job-1'), jobHash('job-2'));
  const h = jobHash('a much longer job identifier 7f3a');
  assert.ok(Number.isInteger(h) && h >= 0 && h < 2 ** 32);
  assert.equal(jobHash(''), 0x811c9dc5);
});
