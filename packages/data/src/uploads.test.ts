import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkTextUpload, firstInvalidUtf8, MAX_TEXT_UPLOAD_BYTES, paragraphs, UploadError } from './uploads';

const text = (s: string) => new TextEncoder().encode(s);
const enough = 'All happy families are alike; each unhappy family is unhappy in its own way.\n'.repeat(60);

test('a text upload is accepted as it is', () => {
  assert.equal(checkTextUpload(text(enough + 'Ünïcödé ✓ 🍵')), enough + 'Ünïcödé ✓ 🍵');
});

test('what is wrong with a text upload is said, with where', () => {
  const cases: [string, Uint8Array, RegExp][] = [
    ['empty', new Uint8Array(0), /^the file is empty$/],
    ['oversized', new Uint8Array(MAX_TEXT_UPLOAD_BYTES + 1).fill(0x61), /is 32\.0 MiB; text uploads are at most 32\.0 MiB/],
    // "café " in Latin-1: é is 0xe9, which would start a three-byte character, then a space.
    ['Latin-1', Uint8Array.from([...text(enough), 0x63, 0x61, 0x66, 0xe9, 0x20]), /the character at byte 4623 is malformed \(bytes e9 20\); save it as UTF-8/],
    ['a lone continuation byte', Uint8Array.from([...text(enough), 0x80]), /at byte 4620 is malformed \(bytes 80\)/],
    ['a truncated character at the end', Uint8Array.from([...text(enough), 0xf0, 0x9f]), /at byte 4620 is malformed \(bytes f0 9f\)/],
    ['an overlong form', Uint8Array.from([...text(enough), 0xe0, 0x80, 0x80]), /at byte 4620 is malformed \(bytes e0 80 80\)/],
    ['binary', Uint8Array.from([...text(enough), 0, 1, 2]), /binary data, not text: a NUL byte at offset 4620/],
    ['too little', text('just a line\n'), /too little text: 12 bytes; at least 4096/],
  ];
  for (const [name, bytes, message] of cases) {
    assert.throws(() => checkTextUpload(bytes), (e: unknown) => e instanceof UploadError && message.test(e.message), name);
  }
  assert.equal(firstInvalidUtf8(text('plain')), null);
});

test('paragraphs are the records an uploaded text is split by', () => {
  assert.deepEqual(paragraphs('One.\nStill one.\n\n  Two.  \r\n\r\n\n\nThree.\n'), ['One.\nStill one.', 'Two.', 'Three.']);
});
