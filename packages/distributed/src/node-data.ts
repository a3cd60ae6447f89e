// Fashion-MNIST from the Debian package's files, for Node tests (browsers load it over HTTP).
import { loadFashionMnist, type Dataset } from '@tabfleet/data';
import { readFile } from 'node:fs/promises';

export const FASHION_MNIST_DIR = process.env.FASHION_MNIST_DIR ?? '/usr/share/datasets/fashion-mnist';

let cached: Promise<{ train: Dataset; test: Dataset }> | null = null;
export function fashionMnistFromDisk(dir = FASHION_MNIST_DIR): Promise<{ train: Dataset; test: Dataset }> {
  cached ??= loadFashionMnist(async (name) => new Uint8Array(await readFile(`${dir}/${name}`)));
  return cached;
}
