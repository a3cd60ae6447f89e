// A 64-bit checksum of a parameter vector's bytes (two independent 32-bit FNV-style lanes over the
// u32 words), the same in browsers and Node, cheap enough to run after every sync. Members report it
// in `round:result`; the server compares members' checksums; tests compare tabs' results with it.
export function checksumOf(values: Float32Array): string {
  const words = new Uint32Array(values.buffer, values.byteOffset, values.length);
  let a = 0x811c9dc5, b = 0x01000193 ^ values.length;
  for (let i = 0; i < words.length; i++) {
    const w = words[i];
    a = Math.imul(a ^ w, 0x01000193);
    b = Math.imul(b ^ ((w >>> 16) | (w << 16)), 0x5bd1e995) + i;
  }
  return (a >>> 0).toString(16).padStart(8, '0') + (b >>> 0).toString(16).padStart(8, '0');
}
