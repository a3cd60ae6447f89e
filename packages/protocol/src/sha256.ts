// SHA-256 (FIPS 180-4), synchronous and the same in browsers and Node: `crypto.subtle` is async
// and `node:crypto` is not in browsers, while a parameter checksum is taken inside synchronous code.
const K = Uint32Array.from([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
  0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
  0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

const rotr = (x: number, n: number) => (x >>> n) | (x << (32 - n));

/**
 * Compresses `blocks` 64-byte blocks of `data` into the state `h`. Aligned input is read a word at a
 * time (a byte swap, since SHA-256 is big-endian and typed arrays here are little-endian): about
 * three times faster than four byte loads per word.
 */
function compress(h: Uint32Array, w: Uint32Array, data: Uint8Array, blocks: number): void {
  const words = data.byteOffset % 4 === 0 ? new Uint32Array(data.buffer, data.byteOffset, blocks * 16) : null;
  for (let b = 0; b < blocks; b++) {
    const base = b * 64;
    if (words) {
      for (let i = 0; i < 16; i++) {
        const x = words[b * 16 + i];
        w[i] = ((x & 0xff) << 24) | ((x & 0xff00) << 8) | ((x >>> 8) & 0xff00) | (x >>> 24);
      }
    } else {
      for (let i = 0; i < 16; i++) {
        const j = base + 4 * i;
        w[i] = (data[j] << 24) | (data[j + 1] << 16) | (data[j + 2] << 8) | data[j + 3];
      }
    }
    for (let i = 16; i < 64; i++) {
      const x = w[i - 15], y = w[i - 2];
      const s0 = rotr(x, 7) ^ rotr(x, 18) ^ (x >>> 3);
      const s1 = rotr(y, 17) ^ rotr(y, 19) ^ (y >>> 10);
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
    }
    let a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (let i = 0; i < 64; i++) {
      const t1 = (hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i]) | 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & bb) ^ (a & c) ^ (bb & c))) | 0;
      hh = g; g = f; f = e; e = (d + t1) | 0; d = c; c = bb; bb = a; a = (t1 + t2) | 0;
    }
    h[0] += a; h[1] += bb; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
  }
}

let native: ((data: Uint8Array) => string) | null = null;

/**
 * A runtime's own SHA-256 (the server's `node:crypto`, some ten times faster: a checkpoint of 800 KB
 * took 8 ms here), used by sha256Hex from then on; null: this file's again. It must give the same
 * 64 lower-case hex digits.
 */
export function useNativeSha256(impl: ((data: Uint8Array) => string) | null): void {
  native = impl;
}

/** SHA-256 of `data` as 64 lower-case hex digits. */
export function sha256Hex(data: Uint8Array): string {
  return native ? native(data) : portableSha256Hex(data);
}

/**
 * SHA-256 of `data` as sha256Hex gives it, by the runtime's WebCrypto where there is one (browsers in a
 * secure context, Node): native code, six to nine times faster than this file's in a tab, off its thread.
 * The bytes are read when it is called (WebCrypto copies them then), so the caller may reuse them at
 * once. A native implementation set by `useNativeSha256` comes first; this file's where there is no
 * WebCrypto, or for a view of shared memory, which WebCrypto refuses.
 */
export async function sha256HexAsync(data: Uint8Array): Promise<string> {
  const subtle = (globalThis as { crypto?: { subtle?: SubtleCrypto } }).crypto?.subtle;
  const shared = typeof SharedArrayBuffer !== 'undefined' && data.buffer instanceof SharedArrayBuffer;
  if (native || !subtle || shared) return sha256Hex(data);
  const digest = new Uint8Array(await subtle.digest('SHA-256', data as Uint8Array<ArrayBuffer>));
  return Array.from(digest, (x) => x.toString(16).padStart(2, '0')).join('');
}

/** This file's SHA-256, whatever `useNativeSha256` set. */
export function portableSha256Hex(data: Uint8Array): string {
  const h = Uint32Array.from([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  const w = new Uint32Array(64);
  const whole = Math.floor(data.length / 64);
  compress(h, w, data, whole);
  // The tail, the 0x80 marker and the bit length, in one or two blocks.
  const rest = data.length - whole * 64;
  const tail = new Uint8Array(rest < 56 ? 64 : 128);
  tail.set(data.subarray(whole * 64));
  tail[rest] = 0x80;
  const bits = data.length * 8;
  const view = new DataView(tail.buffer);
  view.setUint32(tail.length - 8, Math.floor(bits / 2 ** 32));
  view.setUint32(tail.length - 4, bits >>> 0);
  compress(h, w, tail, tail.length / 64);
  return Array.from(h, (x) => x.toString(16).padStart(8, '0')).join('');
}
