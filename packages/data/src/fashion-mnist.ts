// Fashion-MNIST (60k train / 10k test, 28×28 grey, 10 classes) from its four gzip IDX files.
import { decodeSafetensors, encodeSafetensors } from '@tabfleet/protocol';
import type { Dataset } from './dataset';
import { gunzip, IdxError, parseIdx, type IdxArray } from './idx';

export const FASHION_MNIST_FILES = {
  trainImages: 'train-images-idx3-ubyte.gz',
  trainLabels: 'train-labels-idx1-ubyte.gz',
  testImages: 't10k-images-idx3-ubyte.gz',
  testLabels: 't10k-labels-idx1-ubyte.gz',
} as const;

/** Per-pixel normalization: (x/255 − mean)/std over the training set. */
const MEAN = 0.286, STD = 0.353;

export function imagesAndLabels(images: Uint8Array, labels: Uint8Array): Dataset {
  const img = parseIdx(images), lab = parseIdx(labels);
  if (img.dims.length !== 3 || lab.dims.length !== 1) throw new IdxError(`expected images [N, H, W] and labels [N], got [${img.dims}] and [${lab.dims}]`);
  const [n, h, w] = img.dims;
  if (lab.dims[0] !== n) throw new IdxError(`${n} images but ${lab.dims[0]} labels`);
  return fromPixels(img.data, h * w, lab.data);
}

function fromPixels(pixels: Uint8Array, features: number, labels: Uint8Array): Dataset {
  const x = new Float32Array(pixels.length);
  for (let i = 0; i < x.length; i++) x[i] = (pixels[i] / 255 - MEAN) / STD;
  const y = Int32Array.from(labels);
  if (y.some((v) => v > 9)) throw new IdxError('label outside 0..9');
  return { x, y, count: labels.length, features, labelsPerExample: 1, classes: 10 };
}

/** Loads both splits; `fetchFile` returns a file's (gzip) bytes by name. */
export async function loadFashionMnist(fetchFile: (name: string) => Promise<Uint8Array>): Promise<{ train: Dataset; test: Dataset }> {
  const f = FASHION_MNIST_FILES;
  const [ti, tl, vi, vl] = await Promise.all([f.trainImages, f.trainLabels, f.testImages, f.testLabels].map(async (n) => gunzip(await fetchFile(n))));
  return { train: imagesAndLabels(ti, tl), test: imagesAndLabels(vi, vl) };
}

/** Only the 10k test split (a worker with a server-sent training shard needs no more). */
export async function loadFashionMnistTest(fetchFile: (name: string) => Promise<Uint8Array>): Promise<Dataset> {
  const [images, labels] = await Promise.all([FASHION_MNIST_FILES.testImages, FASHION_MNIST_FILES.testLabels].map(async (n) => gunzip(await fetchFile(n))));
  return imagesAndLabels(images, labels);
}

/** Loads over HTTP from a base URL serving the four files. */
export function loadFashionMnistFromUrl(baseUrl: string): Promise<{ train: Dataset; test: Dataset }> {
  return loadFashionMnist(async (name) => {
    const res = await fetch(`${baseUrl.replace(/\/$/, '')}/${name}`);
    if (!res.ok) throw new Error(`fetching ${name}: HTTP ${res.status}`);
    return new Uint8Array(await res.arrayBuffer());
  });
}

/**
 * One worker's shard as safetensors (`images` U8 [n, 28, 28], `labels` U8 [n]), the raw bytes of the
 * examples `shardIndices` deals to it: what the server sends instead of the whole 30 MB training set.
 */
export function encodeFashionShard(images: IdxArray, labels: IdxArray, indices: Int32Array): Uint8Array {
  const [, h, w] = images.dims;
  const px = h * w;
  const img = new Uint8Array(indices.length * px), lab = new Uint8Array(indices.length);
  indices.forEach((j, i) => {
    img.set(images.data.subarray(j * px, (j + 1) * px), i * px);
    lab[i] = labels.data[j];
  });
  return encodeSafetensors({ images: { dtype: 'U8', shape: [indices.length, h, w], data: img }, labels: { dtype: 'U8', shape: [indices.length], data: lab } });
}

/** A shard from `encodeFashionShard` as a normalized dataset. */
export function decodeFashionShard(bytes: Uint8Array): Dataset {
  const { tensors } = decodeSafetensors(bytes);
  const { images, labels } = tensors;
  if (images?.dtype !== 'U8' || labels?.dtype !== 'U8' || images.shape.length !== 3 || labels.shape[0] !== images.shape[0]) {
    throw new IdxError('a shard holds images U8 [n, h, w] and labels U8 [n]');
  }
  return fromPixels(images.data, images.shape[1] * images.shape[2], labels.data);
}
