// Dataset shards over HTTP: a worker downloads only the examples its shard holds. The raw training
// set is read from the Debian package's IDX files once and kept in memory (47 MB). A shard is built
// once and kept in a cache bounded by bytes; every download streams the same bytes with backpressure,
// so clients that never read cost a socket buffer each, not a copy of the shard.
import { FASHION_MNIST_FILES, encodeFashionShard, gunzip, parseIdx, shardIndices, type IdxArray } from '@tabfleet/data';
import { ProtocolError } from '@tabfleet/protocol';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';

/** Built shards kept at once (bytes); the least recently used are dropped beyond it. */
export const SHARD_CACHE_BYTES = 160 * 1024 * 1024;
/** Shard downloads one client address may have in flight. */
export const SHARD_DOWNLOADS_PER_ADDRESS = 4;
/** A download whose client reads nothing for this long is closed. */
export const SHARD_IDLE_TIMEOUT_MS = 30_000;
/** Bytes handed to the socket per write. */
const CHUNK_BYTES = 64 * 1024;

export interface Shard {
  bytes: Uint8Array;
  etag: string;
}

const trainSets = new Map<string, Promise<{ images: IdxArray; labels: IdxArray }>>();

function loadTrainSet(dir: string): Promise<{ images: IdxArray; labels: IdxArray }> {
  let p = trainSets.get(dir);
  if (!p) {
    p = (async () => {
      const [images, labels] = await Promise.all([FASHION_MNIST_FILES.trainImages, FASHION_MNIST_FILES.trainLabels].map(async (f) => parseIdx(await gunzip(await readFile(join(dir, f))))));
      return { images, labels };
    })();
    p.catch(() => trainSets.delete(dir));
    trainSets.set(dir, p);
  }
  return p;
}

export function checkShardParams(index: number, count: number, seed: number): void {
  if (!(Number.isInteger(count) && count >= 1 && count <= 1024 && Number.isInteger(index) && index >= 0 && index < count)) {
    throw new ProtocolError('bad_request', `shard ${index} of ${count}: need 0 ≤ index < count ≤ 1024`);
  }
  if (!Number.isInteger(seed) || seed < 0 || seed > 2 ** 31 - 1) throw new ProtocolError('bad_request', 'seed must be a non-negative 31-bit integer');
}

/** Built shards by key, in least-recently-used order (a Map iterates in insertion order). */
export class ShardCache {
  private readonly entries = new Map<string, Promise<Shard>>();
  private readonly sizes = new Map<string, number>();
  private bytes = 0;
  builds = 0;

  constructor(private readonly maxBytes = SHARD_CACHE_BYTES) {}

  get(key: string, build: () => Promise<Uint8Array>): Promise<Shard> {
    const hit = this.entries.get(key);
    if (hit) {
      this.entries.delete(key);
      this.entries.set(key, hit);
      return hit;
    }
    this.builds++;
    const p = build().then((bytes) => {
      const etag = `"${createHash('sha256').update(bytes).digest('base64url').slice(0, 27)}"`;
      if (this.entries.get(key) === p) {
        this.sizes.set(key, bytes.byteLength);
        this.bytes += bytes.byteLength;
        this.evict(key);
      }
      return { bytes, etag };
    });
    p.catch(() => this.entries.get(key) === p && this.entries.delete(key));
    this.entries.set(key, p);
    return p;
  }

  get size(): number {
    return this.bytes;
  }

  private evict(keep: string): void {
    for (const key of this.entries.keys()) {
      if (this.bytes <= this.maxBytes) return;
      if (key === keep || !this.sizes.has(key)) continue;
      this.bytes -= this.sizes.get(key)!;
      this.sizes.delete(key);
      this.entries.delete(key);
    }
  }
}

/** Shard `index` of `count` of the Fashion-MNIST training set, dealt with `seed`, as safetensors. */
export async function fashionMnistShard(cache: ShardCache, dir: string, index: number, count: number, seed: number): Promise<Shard> {
  checkShardParams(index, count, seed);
  return cache.get(`fashion-mnist:${dir}:${index}:${count}:${seed}`, async () => {
    const { images, labels } = await loadTrainSet(dir).catch((e) => {
      throw new ProtocolError('unknown_job', `Fashion-MNIST is not available on this server (${(e as Error).message})`);
    });
    return encodeFashionShard(images, labels, shardIndices(images.dims[0], index, count, seed));
  });
}

/** An uploaded image set, as the server's Uploads keeps it. */
type LoadImages = () => Promise<{ images: IdxArray; labels: IdxArray; train: Int32Array; validation: Int32Array }>;

/** Shard `index` of `count` of an uploaded image set's training part, dealt with `seed`, in Fashion-MNIST's shard format. */
export function imageUploadShard(cache: ShardCache, id: string, load: LoadImages, index: number, count: number, seed: number): Promise<Shard> {
  checkShardParams(index, count, seed);
  return cache.get(`uploads/${id}:${index}:${count}:${seed}`, async () => {
    const set = await load();
    if (set.train.length < count) throw new ProtocolError('bad_request', `upload ${id} has ${set.train.length} training images: too few for ${count} shards`);
    return encodeFashionShard(set.images, set.labels, shardIndices(set.train.length, index, count, seed).map((i) => set.train[i]));
  });
}

/** The held-out images of an uploaded image set, which evaluators score the model on. */
export function imageUploadValidation(cache: ShardCache, id: string, load: LoadImages): Promise<Shard> {
  return cache.get(`uploads/${id}:validation`, async () => {
    const set = await load();
    return encodeFashionShard(set.images, set.labels, set.validation);
  });
}

/** Counts in-flight downloads per address so one address cannot open many slow transfers. */
export class DownloadSlots {
  private readonly inFlight = new Map<string, number>();
  constructor(private readonly perAddress = SHARD_DOWNLOADS_PER_ADDRESS) {}

  /** A release function, or null when the address already has its share. */
  acquire(address: string): (() => void) | null {
    const n = this.inFlight.get(address) ?? 0;
    if (n >= this.perAddress) return null;
    this.inFlight.set(address, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.inFlight.get(address) ?? 1) - 1;
      if (left <= 0) this.inFlight.delete(address);
      else this.inFlight.set(address, left);
    };
  }
}

/**
 * Sends a cached shard: 304 when the client has it (ETag), else the bytes in chunks, writing the next
 * only when the socket drained; a client that stops reading is dropped after SHARD_IDLE_TIMEOUT_MS.
 */
export function sendShard(req: IncomingMessage, res: ServerResponse, shard: Shard, done: () => void): void {
  res.once('close', done);
  const headers = { etag: shard.etag, 'cache-control': 'private, max-age=3600, immutable' };
  if (req.headers['if-none-match'] === shard.etag) {
    res.writeHead(304, headers).end();
    return;
  }
  res.writeHead(200, { ...headers, 'content-type': 'application/octet-stream', 'content-length': shard.bytes.byteLength });
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  res.setTimeout(SHARD_IDLE_TIMEOUT_MS, () => res.destroy());
  let offset = 0;
  const pump = () => {
    while (offset < shard.bytes.byteLength) {
      const end = Math.min(offset + CHUNK_BYTES, shard.bytes.byteLength);
      const more = res.write(shard.bytes.subarray(offset, end));
      offset = end;
      if (!more) {
        res.once('drain', pump);
        return;
      }
    }
    res.end();
  };
  pump();
}
