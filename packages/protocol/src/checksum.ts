// Two fingerprints of a parameter vector, the same in browsers and Node.
//
// `checksumOf` (two 32-bit FNV-style lanes over the u32 words) is cheap enough to run after every
// sync: members report it in `round:result`, the server compares them, tests compare tabs with it.
// It catches faults and divergence, not forgery (an uploader can pick two words of a fake model to
// hit any value).
//
// `modelDigest` (the first 128 bits of SHA-256 over the f32 bytes) is what the server trusts a
// model by: evaluators report it in `metrics`, joiners in `model:loaded`, and a checkpoint is stored
// only when its digest is the one the evaluators agree on; group averaging digests every part it
// sends and receives. `checkpointDigest` extends it to the strategy state a checkpoint carries
// (DiLoCo's outer momentum, DDP's optimizer buffers), which a joiner loads as it loads the parameters.
// The `…Async` forms give the same values by the runtime's WebCrypto: volunteers use them, since
// in a quiet tab SHA-256 in script ran at 66-146 MB/s, WebCrypto at 571-901 (0.8 to 32 MB), and script
// holds the event loop meanwhile.
import { sha256Hex, sha256HexAsync } from './sha256';

export { portableSha256Hex, sha256HexAsync, useNativeSha256 } from './sha256';

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

/** modelDigest by the runtime's own SHA-256 where it has one (sha256HexAsync): the same value, several times sooner in a tab. */
export async function modelDigestAsync(values: Float32Array): Promise<string> {
  return (await sha256HexAsync(new Uint8Array(values.buffer, values.byteOffset, values.byteLength))).slice(0, 32);
}

/**
 * The digest of a model with the strategy state a joiner loads with it: modelDigest of the parameters
 * when there is none (a LocalSGD checkpoint's digest is its parameters'), else the first 128 bits of
 * SHA-256 over that digest and each state tensor's name and modelDigest, in name order. Members hold
 * the same state (each applies the same agreed update), so they agree on it as on the parameters.
 */
export function checkpointDigest(params: Float32Array, state: Readonly<Record<string, Float32Array>> = {}): string {
  const names = Object.keys(state).sort();
  const digest = modelDigest(params);
  if (names.length === 0) return digest;
  return sha256Hex(stateLines(digest, names, names.map((name) => modelDigest(state[name])))).slice(0, 32);
}

/** What a checkpoint's digest hashes when it carries state: its parameters' digest, then each state tensor's name and digest. */
function stateLines(paramsDigest: string, names: string[], stateDigests: string[]): Uint8Array {
  return new TextEncoder().encode([paramsDigest, ...names.map((name, i) => `${name} ${stateDigests[i]}`)].join('\n'));
}

/** checkpointDigest by the runtime's own SHA-256 where it has one (sha256HexAsync). */
export async function checkpointDigestAsync(params: Float32Array, state: Readonly<Record<string, Float32Array>> = {}): Promise<string> {
  const names = Object.keys(state).sort();
  const [digest, ...stateDigests] = await Promise.all([modelDigestAsync(params), ...names.map((name) => modelDigestAsync(state[name]))]);
  if (names.length === 0) return digest;
  return (await sha256HexAsync(stateLines(digest, names, stateDigests))).slice(0, 32);
}
