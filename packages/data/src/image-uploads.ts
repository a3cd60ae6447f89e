// Checks of image sets researchers upload, with errors that say what is wrong. Two forms: a safetensors
// file with `images` (U8 [N, 28, 28], or with a channel axis of 1) and `labels` (U8, I32 or I64 [N]), as
// `safetensors.torch.save_file` writes them; or an IDX pair (images [N, 28, 28], labels [N]), the
// (Fashion-)MNIST format. The image models (mlp-fashion, cnn-fashion) take 28×28 grey images in 10
// classes, so an upload must be that. Pure functions of the bytes, like the text checks.
import { decodeSafetensors, SafetensorsError, type NamedTensor } from '@tabfleet/protocol';
import { IdxError, parseIdx, type IdxArray } from './idx';
import { UploadError } from './uploads';

/** Largest image set (pixels and labels, after unpacking gzip). Fashion-MNIST's training set is 45 MiB. */
export const MAX_IMAGE_UPLOAD_BYTES = 64 * 1024 * 1024;
/** Fewest images: every tenth is held out, so a few dozen validation images at least. */
export const MIN_IMAGE_UPLOAD_EXAMPLES = 200;
export const UPLOAD_IMAGE_SIDE = 28;
export const UPLOAD_IMAGE_CLASSES = 10;

/** A checked image set: `images` U8 [count, 28, 28] in row-major order, `labels` U8 [count] in 0..9. */
export interface ImageSet {
  count: number;
  images: IdxArray;
  labels: IdxArray;
}

const names = (t: Record<string, unknown>) => Object.keys(t).map((n) => JSON.stringify(n)).join(', ') || 'none';

/** A safetensors image set, checked. */
export function checkImageSafetensors(bytes: Uint8Array): ImageSet {
  if (bytes.length === 0) throw new UploadError('the file is empty');
  let tensors: Record<string, NamedTensor>;
  try {
    tensors = decodeSafetensors(bytes).tensors;
  } catch (e) {
    if (e instanceof SafetensorsError) throw new UploadError(`not a safetensors file: ${e.message}`);
    throw e;
  }
  const { images, labels } = tensors;
  if (!images || !labels) throw new UploadError(`an image set holds the tensors "images" and "labels"; this file holds ${names(tensors)}`);
  if (images.dtype !== 'U8') throw new UploadError(`"images" is ${images.dtype}; store pixels as U8 in 0..255 (torch.uint8)`);
  const s = images.shape;
  const grey = s.length === 3 ? s : s.length === 4 && s[1] === 1 ? [s[0], s[2], s[3]] : s.length === 4 && s[3] === 1 ? [s[0], s[1], s[2]] : null;
  if (!grey) throw new UploadError(`"images" has shape [${s}]; give [N, 28, 28] grey images (or [N, 1, 28, 28])`);
  if (labels.shape.length !== 1) throw new UploadError(`"labels" has shape [${labels.shape}]; give one label per image, [N]`);
  return checkImageSet({ dims: grey, data: images.data }, labels.shape[0], labelValues(labels));
}

/** An IDX pair (each possibly already un-gzipped by the caller), checked. */
export function checkIdxImageUpload(imagesFile: Uint8Array, labelsFile: Uint8Array): ImageSet {
  const parse = (what: string, bytes: Uint8Array) => {
    if (bytes.length === 0) throw new UploadError(`the ${what} file is empty`);
    try {
      return parseIdx(bytes);
    } catch (e) {
      if (e instanceof IdxError) throw new UploadError(`the ${what} file is not IDX: ${e.message}`);
      throw e;
    }
  };
  const images = parse('images', imagesFile), labels = parse('labels', labelsFile);
  if (images.dims.length !== 3) throw new UploadError(`the images file has dimensions [${images.dims}]; give [N, 28, 28]`);
  if (labels.dims.length !== 1) throw new UploadError(`the labels file has dimensions [${labels.dims}]; give [N]`);
  return checkImageSet(images, labels.dims[0], labels.data);
}

/** Labels as numbers, whatever integer type they were stored in. */
function labelValues(t: NamedTensor): ArrayLike<number> {
  const buf = t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + t.data.byteLength);
  if (t.dtype === 'U8') return t.data;
  if (t.dtype === 'I32') return new Int32Array(buf);
  if (t.dtype === 'I64') return Array.from(new BigInt64Array(buf), (v) => (v >= -(2n ** 31n) && v < 2n ** 31n ? Number(v) : Number.NaN));
  throw new UploadError(`"labels" is ${t.dtype}; give integer class ids (U8, I32 or I64)`);
}

function checkImageSet(images: IdxArray, labelCount: number, labels: ArrayLike<number>): ImageSet {
  const [n, h, w] = images.dims;
  if (h !== UPLOAD_IMAGE_SIDE || w !== UPLOAD_IMAGE_SIDE) throw new UploadError(`the images are ${h}×${w}; the image models take ${UPLOAD_IMAGE_SIDE}×${UPLOAD_IMAGE_SIDE} grey images`);
  if (labelCount !== n) throw new UploadError(`${n} images but ${labelCount} labels`);
  if (n < MIN_IMAGE_UPLOAD_EXAMPLES) throw new UploadError(`only ${n} images; at least ${MIN_IMAGE_UPLOAD_EXAMPLES}, as every tenth is held out for validation`);
  if (images.data.length + n > MAX_IMAGE_UPLOAD_BYTES) {
    throw new UploadError(`${n} images are ${(images.data.length / 2 ** 20).toFixed(1)} MiB; image uploads are at most ${MAX_IMAGE_UPLOAD_BYTES / 2 ** 20} MiB`);
  }
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const v = labels[i];
    if (!(Number.isInteger(v) && v >= 0 && v < UPLOAD_IMAGE_CLASSES)) throw new UploadError(`label ${v} of image ${i} is not a class in 0..${UPLOAD_IMAGE_CLASSES - 1}`);
    out[i] = v;
  }
  return { count: n, images: { dims: [n, h, w], data: images.data }, labels: { dims: [n], data: out } };
}

/** Which examples of an uploaded image set are held out for validation: every tenth, so sorted sets stay balanced. */
export function imageSplit(count: number): { train: Int32Array; validation: Int32Array } {
  const train: number[] = [], validation: number[] = [];
  for (let i = 0; i < count; i++) (i % 10 === 9 ? validation : train).push(i);
  return { train: Int32Array.from(train), validation: Int32Array.from(validation) };
}
