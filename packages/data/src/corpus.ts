// Text corpora for language models: records split into train and validation by a stable hash of each
// record (the same text never lands on both sides), tokenized and cut into windows of `context` tokens
// with next-token targets. Shards travel as safetensors of I32 windows.
import { decodeSafetensors, encodeSafetensors } from '@tabfleet/protocol';
import type { Dataset } from './dataset';
import type { Tokenizer } from './tokenizers';

/** The share of records held out for validation. */
export const VALIDATION_FRACTION = 0.05;

/** fortune-mod's data file format: records separated by lines holding only `%`. Overstriking (x\bx) is dropped. */
export function fortuneRecords(text: string): string[] {
  return text
    .replace(/[^\n]\x08/g, '')
    .split(/\r?\n%\r?\n/)
    .map((r) => r.replace(/^%\r?\n/, '').replace(/\r?\n%\s*$/, '').trim())
    .filter((r) => r.length > 0);
}

/** FNV-1a of a string's UTF-16 units: stable across runs, machines and record order. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

export interface CorpusSplit {
  train: string;
  validation: string;
  records: { train: number; validation: number };
}

/** Records to the two splits, joined by blank lines; a record goes to validation when its hash falls in the last `fraction`. */
export function splitRecords(records: string[], fraction = VALIDATION_FRACTION): CorpusSplit {
  const train: string[] = [], validation: string[] = [];
  for (const r of records) ((fnv1a(r) / 2 ** 32) >= 1 - fraction ? validation : train).push(r);
  return { train: train.join('\n\n'), validation: validation.join('\n\n'), records: { train: train.length, validation: validation.length } };
}

/**
 * For tuning: the training records split again, the ones whose hash falls in the `fraction` just
 * below validation's held out. Settings picked on this split never saw the validation split that a
 * benchmark reports. `validation` here is the tuning split.
 */
export function tuningSplit(records: string[], fraction = VALIDATION_FRACTION): CorpusSplit {
  return splitRecords(records.filter((r) => fnv1a(r) / 2 ** 32 < 1 - fraction), 2 * fraction);
}

export interface TokenizedSplit {
  ids: Int32Array;
  /** UTF-8 bytes of the text the ids encode: bits per byte = loss / ln 2 × tokens / bytes. */
  bytes: number;
}

export function tokenize(text: string, tokenizer: Tokenizer): TokenizedSplit {
  return { ids: tokenizer.encode(text), bytes: new TextEncoder().encode(text).length };
}

/** Windows `indices` of the split as a shard: x and y I32 [n, context]. */
export function encodeTextShard(windows: Dataset, indices: ArrayLike<number>): Uint8Array {
  const T = windows.features, n = indices.length;
  const x = new Int32Array(n * T), y = new Int32Array(n * T);
  for (let i = 0; i < n; i++) {
    const j = indices[i];
    x.set(windows.x.subarray(j * T, (j + 1) * T) as Int32Array, i * T);
    y.set(windows.y.subarray(j * T, (j + 1) * T), i * T);
  }
  const tensor = (data: Int32Array) => ({ dtype: 'I32' as const, shape: [n, T], data: new Uint8Array(data.buffer) });
  return encodeSafetensors({ x: tensor(x), y: tensor(y) }, { classes: String(windows.classes) });
}

/** A shard from `encodeTextShard` as token windows; every id must be below the vocabulary. */
export function decodeTextShard(bytes: Uint8Array, vocab: number): Dataset {
  const { tensors } = decodeSafetensors(bytes);
  const { x, y } = tensors;
  if (x?.dtype !== 'I32' || y?.dtype !== 'I32' || x.shape.length !== 2 || x.shape.join() !== y.shape.join()) throw new Error('a text shard holds x and y, I32 [n, context]');
  const [n, T] = x.shape;
  const xs = new Int32Array(x.data.slice().buffer), ys = new Int32Array(y.data.slice().buffer);
  for (const v of [xs, ys]) for (let i = 0; i < v.length; i++) if (!(v[i] >= 0 && v[i] < vocab)) throw new Error(`token id ${v[i]} at ${i} is outside the vocabulary of ${vocab}`);
  return { x: xs, y: ys, count: n, features: T, labelsPerExample: T, classes: vocab };
}

/** Up to `max` windows spread evenly over a split (all when it has fewer): what evaluation reads. */
export function evenlySpaced(count: number, max: number): Int32Array {
  if (count <= max) return Int32Array.from({ length: count }, (_, i) => i);
  return Int32Array.from({ length: max }, (_, i) => Math.floor((i * count) / max));
}

