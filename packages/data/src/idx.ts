// IDX files (the MNIST family's format): magic 0x0000 TT DD, DD big-endian u32 dims, then data.
// Only unsigned bytes (TT = 0x08) occur in (Fashion-)MNIST.

export interface IdxArray {
  dims: number[];
  data: Uint8Array;
}

export class IdxError extends Error {
  override name = 'IdxError';
}

export function parseIdx(bytes: Uint8Array): IdxArray {
  if (bytes.byteLength < 4) throw new IdxError('file too short for an IDX header');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint16(0) !== 0) throw new IdxError('bad IDX magic (is the file still gzip-compressed?)');
  const type = view.getUint8(2), rank = view.getUint8(3);
  if (type !== 0x08) throw new IdxError(`unsupported IDX element type 0x${type.toString(16)} (only u8)`);
  const headerLen = 4 + 4 * rank;
  if (bytes.byteLength < headerLen) throw new IdxError('file too short for its dimensions');
  const dims = Array.from({ length: rank }, (_, i) => view.getUint32(4 + 4 * i));
  const n = dims.reduce((a, d) => a * d, 1);
  if (bytes.byteLength - headerLen !== n) throw new IdxError(`IDX data has ${bytes.byteLength - headerLen} bytes, dims [${dims}] need ${n}`);
  return { dims, data: bytes.subarray(headerLen) };
}

/** An IDX file of unsigned bytes: what `parseIdx` reads back. */
export function encodeIdx(dims: number[], data: Uint8Array): Uint8Array {
  const out = new Uint8Array(4 + 4 * dims.length + data.length);
  const view = new DataView(out.buffer);
  view.setUint8(2, 0x08);
  view.setUint8(3, dims.length);
  dims.forEach((d, i) => view.setUint32(4 + 4 * i, d));
  out.set(data, 4 + 4 * dims.length);
  return out;
}

/** gunzip with the platform's DecompressionStream (browsers and Node ≥ 18). */
export async function gunzip(bytes: Uint8Array): Promise<Uint8Array> {
  const stream = new Blob([bytes as Uint8Array<ArrayBuffer>]).stream().pipeThrough(new DecompressionStream('gzip'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
