// The fortunes corpus as the lm benchmarks feed it: byte-token windows, training and held-out shards
// (validation for `lm`, the tuning split for `lm-tune`), served to the distributed page from memory.
import { bytesTokenizer, encodeTextShard, textWindows, tokenize, type Dataset } from '@tabfleet/data';
import { loadFortunes } from '@tabfleet/data/node';
import { openPage, type OpenedPage } from '@tabfleet/headless';

const allOf = (ds: Dataset) => Int32Array.from({ length: ds.count }, (_, i) => i);

export interface LmShards {
  train: Uint8Array;
  /** Validation windows, or with `tuning` the tuning split's. */
  heldOut: Uint8Array;
  facts: { corpus: string; records: { train: number; validation: number }; trainWindows: number; heldOutWindows: number; trainBytes: number; heldOutBytes: number };
}

/** Training and held-out shards at `context`; `tuning`: the held-out part is the tuning split (corpus.ts tuningSplit). */
export async function lmShards(context: number, opts: { tuning?: boolean } = {}): Promise<LmShards> {
  const split = await loadFortunes(undefined, { tuning: opts.tuning ?? false });
  const windows = (text: string) => {
    const t = tokenize(text, bytesTokenizer);
    return { windows: textWindows(t.ids, context, bytesTokenizer.vocabSize), bytes: t.bytes };
  };
  const train = windows(split.train), heldOut = windows(split.validation);
  return {
    train: encodeTextShard(train.windows, allOf(train.windows)), heldOut: encodeTextShard(heldOut.windows, allOf(heldOut.windows)),
    facts: { corpus: 'fortunes (Debian package), byte tokens', records: split.records, trainWindows: train.windows.count, heldOutWindows: heldOut.windows.count,
      trainBytes: train.bytes, heldOutBytes: heldOut.bytes },
  };
}

/** The distributed page, with the shards at the URLs that runLm reads (`validation`: the held-out shard), answered from memory. */
export async function openLmPage(browser: Parameters<typeof openPage>[0], baseUrl: string, shards: LmShards,
  log: (line: string) => void): Promise<{ tab: OpenedPage; urls: { train: string; validation: string } }> {
  const tab = await openPage(browser, `${baseUrl}/e2e/pages/distributed.html`, { log });
  const urls = { train: `${baseUrl}/bench-lm/train.safetensors`, validation: `${baseUrl}/bench-lm/held-out.safetensors` };
  await tab.page.route(`${baseUrl}/bench-lm/**`, (route) => route.fulfill({ body: Buffer.from(route.request().url() === urls.train ? shards.train : shards.heldOut),
    contentType: 'application/octet-stream' }));
  return { tab, urls };
}
