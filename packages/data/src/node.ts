// Node-only loaders (they read the Debian packages' files): not for browser bundles.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fortuneRecords, splitRecords, tuningSplit, type CorpusSplit } from './corpus';

/**
 * The English corpus: the Debian package `fortunes` (fortune-mod's data), thousands of quotations,
 * poems, jokes and definitions written by many people, ~2.4 MB of plain text. Chosen over
 * `bible-kjv-text` (its text ships in a compressed binary format read by its own program) and
 * `jargon-text` (1.7 MB, much of it index lines). `art` and `ascii-art` are left out: they are pictures.
 */
export const FORTUNES_DIR = '/usr/share/games/fortunes';
const NOT_PROSE = new Set(['art', 'ascii-art']);

/**
 * Every category file in name order (not the .dat indexes, not the .u8 links to the same files), split
 * into train and validation; with `tuning`, the training records split into train and a tuning split
 * (corpus.ts tuningSplit) and the validation records left out.
 */
export async function loadFortunes(dir = FORTUNES_DIR, opts: { tuning?: boolean } = {}): Promise<CorpusSplit & { files: string[] }> {
  const files = (await readdir(dir)).filter((f) => !f.includes('.') && !NOT_PROSE.has(f)).sort();
  if (files.length === 0) throw new Error(`no fortune files in ${dir}: install the Debian package fortunes`);
  const records = (await Promise.all(files.map(async (f) => fortuneRecords(await readFile(join(dir, f), 'utf8'))))).flat();
  return { ...(opts.tuning ? tuningSplit(records) : splitRecords(records)), files };
}
