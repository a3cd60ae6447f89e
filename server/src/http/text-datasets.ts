// Text corpora over HTTP: a member downloads the windows of its shard of the training split, and
// anyone the evaluation windows of the validation split, tokenized with the job's tokenizer and cut
// at its model's context. A corpus is read and tokenized once per tokenizer (the GPT-2 BPE of the
// 2.4 MB fortunes corpus takes about half a second) and shards go through the same byte-bounded
// cache as Fashion-MNIST's.
import { encodeTextShard, evenlySpaced, loadTokenizer, shardIndices, textWindows, tokenize, type CorpusSplit, type TokenizedSplit } from '@tabfleet/data';
import { loadFortunes } from '@tabfleet/data/node';
import { ProtocolError, TOKENIZERS, gptConfigSchema, type Tokenizer } from '@tabfleet/protocol';
import { checkShardParams, type Shard, type ShardCache } from './datasets';

/**
 * A text the server reads from disk and cuts for jobs: `fortunes`, or `uploads/<id>`, a researcher's
 * upload (the generated corpus is made by the workers themselves). It names the URL path too.
 */
export type ServedText = 'fortunes' | `uploads/u-${string}`;

/** Reads a served text's train and validation split. */
export type TextLoader = (source: ServedText) => Promise<CorpusSplit>;

/** Windows of the validation split that evaluation reads: 64 windows spread over it (8,192 tokens at context 128). */
export const VALIDATION_WINDOWS = 64;

export interface CorpusFacts {
  source: ServedText;
  tokenizer: Tokenizer;
  records: { train: number; validation: number };
  train: { tokens: number; bytes: number };
  validation: { tokens: number; bytes: number };
  /** UTF-8 bytes per token of the validation split, for bits per byte. */
  bytesPerToken: number;
}

interface Tokenized {
  facts: CorpusFacts;
  train: TokenizedSplit;
  validation: TokenizedSplit;
}

/**
 * Tokenized texts kept at once, least recently used dropped first: a 32 MiB upload is 128 MB of byte
 * ids, so a server with many uploads keeps only the texts of its running jobs (their shards are cached
 * by bytes in the ShardCache besides).
 */
const MAX_TOKENIZED = 4;
const corpora = new Map<string, Promise<Tokenized>>();

/** The fortunes corpus from its Debian package, or an upload through `uploads`. */
export function textLoader(uploads: { split(id: string): Promise<CorpusSplit> }): TextLoader {
  return (source) => (source === 'fortunes' ? loadFortunes() : uploads.split(source.slice('uploads/'.length)));
}

function tokenized(load: TextLoader, dataset: ServedText, tokenizer: Tokenizer): Promise<Tokenized> {
  const key = `${dataset}:${tokenizer}`;
  let p = corpora.get(key);
  if (p) {
    corpora.delete(key);
    corpora.set(key, p);
  } else {
    p = (async () => {
      const split = await load(dataset).catch((e) => {
        if (e instanceof ProtocolError) throw e;
        throw new ProtocolError('unknown_job', `${dataset} is not available on this server (${(e as Error).message})`);
      });
      const tk = await loadTokenizer(tokenizer);
      const train = tokenize(split.train, tk), validation = tokenize(split.validation, tk);
      const count = (s: TokenizedSplit) => ({ tokens: s.ids.length, bytes: s.bytes });
      const facts: CorpusFacts = { source: dataset, tokenizer, records: split.records, train: count(train), validation: count(validation), bytesPerToken: validation.bytes / validation.ids.length };
      return { facts, train, validation };
    })();
    p.catch(() => corpora.delete(key));
    corpora.set(key, p);
    for (const old of corpora.keys()) if (corpora.size > MAX_TOKENIZED && old !== key) corpora.delete(old);
  }
  return p;
}

/** The tokenizer named in a URL: one a served corpus can be cut with. */
export function tokenizerParam(url: URL): Tokenizer {
  const tokenizer = url.searchParams.get('tokenizer') as Tokenizer;
  if (!TOKENIZERS.includes(tokenizer) || tokenizer === 'chars') throw new ProtocolError('bad_request', `tokenizer must be one of bytes, gpt2 (got ${JSON.stringify(tokenizer)})`);
  return tokenizer;
}

/** The tokenizer and context named in a URL, checked as a job spec checks them. */
export function textParams(url: URL): { tokenizer: Tokenizer; context: number } {
  const tokenizer = tokenizerParam(url);
  const context = Number(url.searchParams.get('context'));
  if (!gptConfigSchema.shape.context.safeParse(context).success) throw new ProtocolError('bad_request', `context must be an integer in 2..4096 (got ${url.searchParams.get('context')})`);
  return { tokenizer, context };
}

export async function corpusFacts(load: TextLoader, dataset: ServedText, tokenizer: Tokenizer): Promise<CorpusFacts> {
  return (await tokenized(load, dataset, tokenizer)).facts;
}

/** Shard `index` of `count` of the training split's windows, dealt with `seed`. */
export function textShard(cache: ShardCache, load: TextLoader, dataset: ServedText, tokenizer: Tokenizer, context: number, index: number, count: number, seed: number): Promise<Shard> {
  checkShardParams(index, count, seed);
  return cache.get(`${dataset}:${tokenizer}:${context}:${index}:${count}:${seed}`, async () => {
    const { train } = await tokenized(load, dataset, tokenizer);
    const windows = textWindows(train.ids, context, (await loadTokenizer(tokenizer)).vocabSize);
    if (windows.count < count) throw new ProtocolError('bad_request', `${dataset} has ${windows.count} windows of ${context} tokens: too few for ${count} shards`);
    return encodeTextShard(windows, shardIndices(windows.count, index, count, seed));
  });
}

/** The evaluation windows of the validation split. */
export function validationWindows(cache: ShardCache, load: TextLoader, dataset: ServedText, tokenizer: Tokenizer, context: number): Promise<Shard> {
  return cache.get(`${dataset}:${tokenizer}:${context}:validation`, async () => {
    const { validation } = await tokenized(load, dataset, tokenizer);
    const windows = textWindows(validation.ids, context, (await loadTokenizer(tokenizer)).vocabSize);
    if (windows.count === 0) throw new ProtocolError('bad_request', `${dataset}'s validation split has ${validation.ids.length} ${tokenizer} tokens: not one window of ${context}`);
    return encodeTextShard(windows, evenlySpaced(windows.count, VALIDATION_WINDOWS));
  });
}
