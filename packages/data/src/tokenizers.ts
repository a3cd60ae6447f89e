// Text ↔ token ids. `chars`: the generated corpus's 30 characters (a vocabulary of 32); `bytes`: UTF-8
// bytes (256), for small tests and byte-level models; `gpt2`: GPT-2's byte-pair encoding (50,257
// tokens) from gpt-tokenizer's r50k_base, which ships the vocabulary, loaded only when a job asks for
// it (564 KB of ranks) and working offline in Node and browsers alike.
import { TOKENIZER_VOCAB, type Tokenizer as TokenizerName } from '@tabfleet/protocol';
import { CHARSET, decodeText, encodeText } from './text';

export interface Tokenizer {
  readonly name: TokenizerName;
  readonly vocabSize: number;
  encode(text: string): Int32Array;
  decode(ids: ArrayLike<number>): string;
}

export const charsTokenizer: Tokenizer = {
  name: 'chars', vocabSize: TOKENIZER_VOCAB.chars,
  encode: (text) => {
    const bad = [...text].find((ch) => !CHARSET.includes(ch));
    if (bad !== undefined) throw new Error(`the chars tokenizer knows only ${JSON.stringify(CHARSET)}: ${JSON.stringify(bad)} is not among them`);
    return encodeText(text);
  },
  decode: (ids) => decodeText(ids),
};

export const bytesTokenizer: Tokenizer = {
  name: 'bytes', vocabSize: TOKENIZER_VOCAB.bytes,
  encode: (text) => Int32Array.from(new TextEncoder().encode(text)),
  decode: (ids) => new TextDecoder().decode(Uint8Array.from(ids as ArrayLike<number>)),
};

let gpt2: Promise<Tokenizer> | null = null;

export function loadTokenizer(name: TokenizerName): Promise<Tokenizer> {
  if (name === 'chars') return Promise.resolve(charsTokenizer);
  if (name === 'bytes') return Promise.resolve(bytesTokenizer);
  gpt2 ??= import('gpt-tokenizer/encoding/r50k_base').then((m) => {
    if (m.vocabularySize !== TOKENIZER_VOCAB.gpt2) throw new Error(`gpt-tokenizer's r50k_base has ${m.vocabularySize} tokens, GPT-2 ${TOKENIZER_VOCAB.gpt2}`);
    return {
      name: 'gpt2', vocabSize: TOKENIZER_VOCAB.gpt2,
      encode: (text: string) => Int32Array.from(m.encode(text)),
      decode: (ids: ArrayLike<number>) => m.decode(Array.from(ids)),
    } satisfies Tokenizer;
  });
  return gpt2;
}
