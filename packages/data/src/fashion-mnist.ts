// Fashion-MNIST (60k train / 10k test, 28×28 grey, 10 classes) from its four gzip IDX files.
import type { Dataset } from './dataset';
import { gunzip, IdxError, parseIdx } from './idx';

export const FASHION_MNIST_FILES = {
  trainImages: 'train-images-idx3-ubyte.gz',
  trainLabels: 'train-labels-idx1-ubyte.gz',
  testImages: 't10k-images-idx3-ubyte.gz',
  testLabels: 't10k-labels-idx1-ubyte.gz',
} as const;

export const FASHION_MNIST_CLASSES = ['T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot'];

/** Per-pixel normalization: (x/255 − mean)/std over the training set. */
const MEAN = 0.286, STD = 0.353;

export function imagesAndLabels(images: Uint8Array, labels: Uint8Array): Dataset {
  const img = parseIdx(images), lab = parseIdx(labels);
  if (img.dims.length !== 3 || lab.dims.length !== 1) throw new IdxError(`expected images [N, H, W] and labels [N], got [${img.dims}] and [${lab.dims}]`);
  const [n, h, w] = img.dims;
  if (lab.dims[0] !== n) throw new IdxError(`${n} images but ${lab.dims[0]} labels`);
  const x = new Float32Array(n * h * w);
  for (let i = 0; i < x.length; i++) x[i] = (img.data[i] / 255 - MEAN) / STD;
  const y = Int32Array.from(lab.data);
  if (y.some((v) => v > 9)) throw new IdxError('label outside 0..9');
  return { x, y, count: n, features: h * w, labelsPerExample: 1, classes: 10 };
}

/** Loads both splits; `fetchFile` returns a file's (gzip) bytes by name. */
export async function loadFashionMnist(fetchFile: (name: string) => Promise<Uint8Array>): Promise<{ train: Dataset; test: Dataset }> {
  const f = FASHION_MNIST_FILES;
  const [ti, tl, vi, vl] = await Promise.all([f.trainImages, f.trainLabels, f.testImages, f.testLabels].map(async (n) => gunzip(await fetchFile(n))));
  return { train: imagesAndLabels(ti, tl), test: imagesAndLabels(vi, vl) };
}

/** Loads over HTTP from a base URL serving the four files. */
export function loadFashionMnistFromUrl(baseUrl: string): Promise<{ train: Dataset; test: Dataset }> {
  return loadFashionMnist(async (name) => {
    const res = await fetch(`${baseUrl.replace(/\/$/, '')}/${name}`);
    if (!res.ok) throw new Error(`fetching ${name}: HTTP ${res.status}`);
    return new Uint8Array(await res.arrayBuffer());
  });
}
