// Researchers' uploaded datasets, kept under the data directory: `<dir>/<id>.txt` (a text) or
// `<id>.safetensors` (an image set, as checked: images U8 [N, 28, 28], labels U8 [N]) and its facts in
// `<id>.json`, written only after the files passed their checks (packages/data uploads.ts,
// image-uploads.ts), the facts last, so a crash mid-write leaves no listed upload. One node's disk: a
// server sharing jobs through Redis serves only the uploads it holds itself.
import {
  checkIdxImageUpload, checkImageSafetensors, checkTextUpload, encodeFashionShard, imageSplit, MAX_IMAGE_UPLOAD_BYTES, paragraphs, splitRecords, UploadError,
  type CorpusSplit, type ImageSet,
} from '@tabfleet/data';
import { decodeSafetensors, ProtocolError, uploadIdSchema, type JobSpec, type UploadInfo, type UploadKind } from '@tabfleet/protocol';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

export type { UploadInfo, UploadKind } from '@tabfleet/protocol';

/** An image set as uploaded: one safetensors file, or an IDX pair (each may be gzip-compressed). */
export type ImageUpload = { safetensors: Uint8Array } | { images: Uint8Array; labels: Uint8Array };

/** A stored image set with the example indices of its split. */
export interface StoredImages extends ImageSet {
  train: Int32Array;
  validation: Int32Array;
}

const refuse = (name: string, e: unknown): never => {
  if (e instanceof UploadError) throw new ProtocolError('bad_request', `upload ${JSON.stringify(name)}: ${e.message}`);
  throw e;
};

/** A file's bytes, un-gzipped when it starts with gzip's magic, never past the image upload limit. */
function unpacked(what: string, bytes: Uint8Array): Uint8Array {
  if (bytes[0] !== 0x1f || bytes[1] !== 0x8b) return bytes;
  try {
    return new Uint8Array(gunzipSync(bytes, { maxOutputLength: MAX_IMAGE_UPLOAD_BYTES }));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') throw new UploadError(`the ${what} file unpacks to more than ${MAX_IMAGE_UPLOAD_BYTES / 2 ** 20} MiB`);
    throw new UploadError(`the ${what} file is broken gzip (${(e as Error).message})`);
  }
}

export class Uploads {
  constructor(private readonly dir: string) {}

  /** Checks and stores a text file; a bad file is refused with what is wrong and nothing is written. */
  async addText(name: string, bytes: Uint8Array, now: number): Promise<UploadInfo> {
    let text = '';
    try {
      text = checkTextUpload(bytes);
    } catch (e) {
      refuse(name, e);
    }
    const split = splitRecords(paragraphs(text));
    if (split.records.validation === 0 || split.records.train === 0) {
      throw new ProtocolError(
        'bad_request',
        `upload ${JSON.stringify(name)}: it has ${split.records.train + split.records.validation} paragraphs; a held-out part needs more (separate paragraphs by blank lines)`,
      );
    }
    return this.store(name, 'text', bytes, split.records, now);
  }

  /** Checks and stores an image set, in the one form shards are cut from; a bad file is refused with what is wrong. */
  async addImages(name: string, upload: ImageUpload, now: number): Promise<UploadInfo> {
    let set: ImageSet | null = null;
    try {
      set = 'safetensors' in upload
        ? checkImageSafetensors(unpacked('safetensors', upload.safetensors))
        : checkIdxImageUpload(unpacked('images', upload.images), unpacked('labels', upload.labels));
    } catch (e) {
      refuse(name, e);
    }
    const { images, labels, count } = set!;
    const split = imageSplit(count);
    const all = Int32Array.from({ length: count }, (_, i) => i);
    return this.store(name, 'images', encodeFashionShard(images, labels, all), { train: split.train.length, validation: split.validation.length }, now);
  }

  private async store(name: string, kind: UploadKind, bytes: Uint8Array, records: UploadInfo['records'], now: number): Promise<UploadInfo> {
    const info: UploadInfo = { id: `u-${randomBytes(6).toString('hex')}`, name, kind, bytes: bytes.length, records, createdAt: now };
    mkdirSync(this.dir, { recursive: true });
    await writeFile(join(this.dir, `${info.id}.${kind === 'text' ? 'txt' : 'safetensors'}`), bytes);
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

  private async getKind(id: string, kind: UploadKind): Promise<UploadInfo> {
    const info = await this.get(id);
    if (!info) throw new ProtocolError('unknown_job', `no uploaded dataset ${id}`);
    if (info.kind !== kind) throw new ProtocolError('bad_request', `uploaded dataset ${id} is ${info.kind === 'text' ? 'a text' : 'an image set'}`);
    return info;
  }

  /** The upload's text split into train and validation, as the server cuts it into windows. */
  async split(id: string): Promise<CorpusSplit> {
    await this.getKind(id, 'text');
    return splitRecords(paragraphs(await readFile(join(this.dir, `${id}.txt`), 'utf8')));
  }

  /** An uploaded image set and its split. */
  async images(id: string): Promise<StoredImages> {
    await this.getKind(id, 'images');
    const { images, labels } = decodeSafetensors(new Uint8Array(await readFile(join(this.dir, `${id}.safetensors`)))).tensors;
    const count = labels.shape[0];
    return { count, images: { dims: images.shape, data: images.data }, labels: { dims: labels.shape, data: labels.data }, ...imageSplit(count) };
  }

  /** A job that names an upload may be created only when an upload of its kind is here. */
  async check(spec: JobSpec): Promise<void> {
    if (!spec.upload) return;
    const info = await this.get(spec.upload);
    if (!info) throw new ProtocolError('bad_request', `job spec: upload: no uploaded dataset ${spec.upload} on this server`);
    const want: UploadKind = spec.dataset === 'image-upload' ? 'images' : 'text';
    if (info.kind !== want) {
      throw new ProtocolError('bad_request', `job spec: upload: ${spec.upload} is ${info.kind === 'text' ? 'a text' : 'an image set'}, `
        + `and a ${spec.dataset} job needs ${want === 'text' ? 'a text' : 'an image set'}`);
    }
  }
}
