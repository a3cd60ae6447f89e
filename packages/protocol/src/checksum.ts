// Two fingerprints of a parameter vector, the same in browsers and Node.
//
// `checksumOf` (two 32-bit FNV-style lanes over the u32 words) is cheap enough to run after every
// sync: members report it in `round:result`, the server compares them, tests compare tabs with it.
// It catches faults and divergence, not forgery (an uploader can pick two words of a fake model to
// hit any value).
//
// `modelDigest` (the first 128 bits of SHA-256 over the f32 bytes) is what the server trusts a
// model by: evaluators report it in `metrics`, joiners in `model:loaded`, and a checkpoint is stored
// only when the digest of its parameters is the one the evaluators agree on. It costs a few ms per
// million parameters more, and runs only on evaluated and checkpointed syncs.
import { sha256Hex } from './sha256';

export { portableSha256Hex, useNativeSha256 } from './sha256';

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

export function modelDigest(values: Float32Array): string {
  return sha256Hex(new Uint8Array(values.buffer, values.byteOffset, values.byteLength)).slice(0, 32);
}
