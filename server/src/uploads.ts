// Researchers' uploaded datasets, kept under the data directory: `<dir>/<id>.txt` and its facts in
// `<id>.json`, written only after the file passed its checks (packages/data uploads.ts), the facts
// last, so a crash mid-write leaves no listed upload. One node's disk: a server sharing jobs through
// Redis serves only the uploads it holds itself.
import { checkTextUpload, paragraphs, splitRecords, UploadError, type CorpusSplit } from '@tabfleet/data';
import { ProtocolError, uploadIdSchema, type JobSpec } from '@tabfleet/protocol';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface UploadInfo {
  id: string;
  name: string;
  kind: 'text';
  bytes: number;
  /** Paragraphs, the records it is split by, on each side. */
  records: { train: number; validation: number };
  createdAt: number;
}

export class Uploads {
  constructor(private readonly dir: string) {}

  /** Checks and stores a text file; a bad file is refused with what is wrong and nothing is written. */
  async addText(name: string, bytes: Uint8Array, now: number): Promise<UploadInfo> {
    let text: string;
    try {
      text = checkTextUpload(bytes);
    } catch (e) {
      if (e instanceof UploadError) throw new ProtocolError('bad_request', `upload ${JSON.stringify(name)}: ${e.message}`);
      throw e;
    }
    const split = splitRecords(paragraphs(text));
    if (split.records.validation === 0 || split.records.train === 0) {
      throw new ProtocolError('bad_request', `upload ${JSON.stringify(name)}: it has ${split.records.train + split.records.validation} paragraphs; a held-out part needs more (separate paragraphs by blank lines)`);
    }
    const info: UploadInfo = { id: `u-${randomBytes(6).toString('hex')}`, name, kind: 'text', bytes: bytes.length, records: split.records, createdAt: now };
    mkdirSync(this.dir, { recursive: true });
    await writeFile(join(this.dir, `${info.id}.txt`), bytes);
    await writeFile(join(this.dir, `${info.id}.json.tmp`), JSON.stringify(info));
    await rename(join(this.dir, `${info.id}.json.tmp`), join(this.dir, `${info.id}.json`));
    return info;
  }

  async list(): Promise<UploadInfo[]> {
    if (!existsSync(this.dir)) return [];
    const names = (await readdir(this.dir)).filter((f) => /^u-[0-9a-f]{12}\.json$/.test(f));
    const infos = await Promise.all(names.map(async (f) => JSON.parse(await readFile(join(this.dir, f), 'utf8')) as UploadInfo));
    return infos.sort((a, b) => b.createdAt - a.createdAt);
  }

  async get(id: string): Promise<UploadInfo | null> {
    if (!uploadIdSchema.safeParse(id).success) return null;
    const file = join(this.dir, `${id}.json`);
    return existsSync(file) ? (JSON.parse(await readFile(file, 'utf8')) as UploadInfo) : null;
  }

  /** The upload's text split into train and validation, as the server cuts it into windows. */
  async split(id: string): Promise<CorpusSplit> {
    if (!(await this.get(id))) throw new ProtocolError('unknown_job', `no uploaded dataset ${id}`);
    return splitRecords(paragraphs(await readFile(join(this.dir, `${id}.txt`), 'utf8')));
  }

  /** A job that names an upload may be created only when the upload is here. */
  async check(spec: JobSpec): Promise<void> {
    if (spec.dataset === 'text-upload' && !(await this.get(spec.upload!))) throw new ProtocolError('bad_request', `job spec: upload: no uploaded dataset ${spec.upload} on this server`);
  }
}
