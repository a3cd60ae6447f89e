// Dataset shards over HTTP: a worker downloads only the examples its shard holds. The raw training
// set is read from the Debian package's IDX files once and kept in memory (47 MB).
import { FASHION_MNIST_FILES, encodeFashionShard, gunzip, parseIdx, shardIndices, type IdxArray } from '@tabfleet/data';
import { ProtocolError } from '@tabfleet/protocol';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

const cache = new Map<string, Promise<{ images: IdxArray; labels: IdxArray }>>();

function loadTrainSet(dir: string): Promise<{ images: IdxArray; labels: IdxArray }> {
  let p = cache.get(dir);
  if (!p) {
    p = (async () => {
      const [images, labels] = await Promise.all([FASHION_MNIST_FILES.trainImages, FASHION_MNIST_FILES.trainLabels].map(async (f) => parseIdx(await gunzip(await readFile(join(dir, f))))));
      return { images, labels };
    })();
    p.catch(() => cache.delete(dir));
    cache.set(dir, p);
  }
  return p;
}

/** Shard `index` of `count` of the Fashion-MNIST training set, dealt with `seed`, as safetensors. */
export async function fashionMnistShard(dir: string, index: number, count: number, seed: number): Promise<Uint8Array> {
  if (!(Number.isInteger(count) && count >= 1 && count <= 1024 && Number.isInteger(index) && index >= 0 && index < count)) {
    throw new ProtocolError('bad_request', `shard ${index} of ${count}: need 0 ≤ index < count ≤ 1024`);
  }
  if (!Number.isInteger(seed) || seed < 0 || seed > 2 ** 31 - 1) throw new ProtocolError('bad_request', 'seed must be a non-negative 31-bit integer');
  const { images, labels } = await loadTrainSet(dir).catch((e) => {
    throw new ProtocolError('unknown_job', `Fashion-MNIST is not available on this server (${(e as Error).message})`);
  });
  return encodeFashionShard(images, labels, shardIndices(images.dims[0], index, count, seed));
}
