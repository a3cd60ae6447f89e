// A small generated text corpus for the char-level transformer, and its tokenization into windows.
// The corpus follows a tiny grammar, so it has structure a model can learn (loss falls well below
// the uniform log(vocab)) while needing nothing downloaded.
import { Rng } from '@tabfleet/protocol';
import type { Dataset } from './dataset';

const SUBJECTS = ['the cat', 'a dog', 'the old man', 'my sister', 'the robot', 'a small bird', 'the teacher', 'our neighbour'];
const VERBS = ['sees', 'likes', 'follows', 'paints', 'finds', 'remembers', 'carries', 'watches'];
const OBJECTS = ['the red ball', 'a quiet river', 'the tall tree', 'a green apple', 'the bright moon', 'an empty box', 'the long road'];
const ENDINGS = ['.', ' today.', ' at night.', ' again.', ' with care.', ', and smiles.'];

export const CHARSET = ' abcdefghijklmnopqrstuvwxyz.,\n';

export function generateCorpus(sentences: number, seed: number): string {
  const rng = new Rng(seed);
  const pick = (a: string[]) => a[rng.int(a.length)];
  const out: string[] = [];
  for (let i = 0; i < sentences; i++) out.push(`${pick(SUBJECTS)} ${pick(VERBS)} ${pick(OBJECTS)}${pick(ENDINGS)}${i % 4 === 3 ? '\n' : ' '}`);
  return out.join('');
}

export function encodeText(text: string): Int32Array {
  return Int32Array.from(text, (ch) => {
    const id = CHARSET.indexOf(ch);
    if (id < 0) throw new Error(`character ${JSON.stringify(ch)} is not in the charset`);
    return id;
  });
}

export function decodeText(ids: ArrayLike<number>): string {
  return Array.from(ids, (i) => CHARSET[i] ?? '?').join('');
}

/** Windows of `context` ids (x) and the following ids (y), with stride `context`. */
export function textWindows(ids: Int32Array, context: number, vocab: number): Dataset {
  const count = Math.floor((ids.length - 1) / context);
  const x = new Int32Array(count * context), y = new Int32Array(count * context);
  for (let i = 0; i < count; i++) {
    x.set(ids.subarray(i * context, (i + 1) * context), i * context);
    y.set(ids.subarray(i * context + 1, (i + 1) * context + 1), i * context);
  }
  return { x, y, count, features: context, labelsPerExample: context, classes: vocab };
}
