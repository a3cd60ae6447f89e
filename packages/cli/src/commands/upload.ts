// `tabfleet upload FILE`: a researcher's text or image set, streamed to POST /api/datasets with a
// progress bar; the server checks it before it stores anything and answers with the upload's id.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename } from 'node:path';
import type { Command } from '../command';
import { CliError, EXIT } from '../errors';
import { formatBytes, type Progress } from '../output';
import type { UploadInfo } from '@tabfleet/protocol';

/** A body piece: bytes as they are, or a file read as it is sent. */
type Piece = Uint8Array | { file: string; size: number };

async function sizeOf(file: string): Promise<number> {
  try {
    const s = await stat(file);
    if (!s.isFile()) throw new Error('not a regular file');
    return s.size;
  } catch (e) {
    throw new CliError(EXIT.usage, `cannot read ${file}: ${(e as Error).message}`);
  }
}

/** An IDX pair as multipart/form-data with the parts `images` and `labels`, the form the server parses. */
function multipart(images: { file: string; size: number }, labels: { file: string; size: number }): { pieces: Piece[]; type: string } {
  const boundary = `tabfleet-${Math.random().toString(16).slice(2)}${Date.now().toString(16)}`;
  const head = (name: string, file: string) => new TextEncoder().encode(
    `--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="${basename(file).replace(/["\r\n]/g, '_')}"\r\n`
    + 'Content-Type: application/octet-stream\r\n\r\n',
  );
  const pieces: Piece[] = [head('images', images.file), images, new TextEncoder().encode('\r\n'), head('labels', labels.file), labels, new TextEncoder().encode(`\r\n--${boundary}--\r\n`)];
  return { pieces, type: `multipart/form-data; boundary=${boundary}` };
}

const lengthOf = (p: Piece) => (p instanceof Uint8Array ? p.byteLength : p.size);

/** The pieces in order, files read in chunks as fetch pulls them, counted on the bar. */
async function* body(pieces: Piece[], bar: Progress): AsyncGenerator<Uint8Array> {
  let sent = 0;
  for (const p of pieces) {
    const chunks: AsyncIterable<Uint8Array> = p instanceof Uint8Array ? [p] as unknown as AsyncIterable<Uint8Array> : createReadStream(p.file, { highWaterMark: 256 * 1024 });
    for await (const chunk of chunks) {
      sent += chunk.byteLength;
      bar.update(sent);
      yield chunk;
    }
  }
}

export const upload: Command = {
  name: 'upload',
  usage: 'tabfleet upload FILE [--name NAME] [--kind text|images] [--labels LABELS]',
  summary: 'upload a text or an image set for jobs to train on (progress bar); prints its id',
  help: [
    'text (the default): UTF-8, paragraphs between blank lines, at most 32 MiB. images: a safetensors file',
    '(images U8 [N, 28, 28], labels [N] in 0..9), or an IDX pair: FILE the images, --labels the labels. Files may be gzip.',
    'The server checks the file before it stores anything; a refusal says what is wrong (exit 2).',
    'Prints the upload\'s id alone on stdout; a job names it as "upload" with dataset text-upload or image-upload.',
  ],
  options: { name: { type: 'string' }, kind: { type: 'string' }, labels: { type: 'string' } },
  async run({ args, values, out, api }) {
    if (args.length !== 1) throw new CliError(EXIT.usage, 'give one file: tabfleet upload FILE [--name NAME] [--kind text|images]');
    const kind = (values.kind as string | undefined) ?? 'text';
    if (kind !== 'text' && kind !== 'images') throw new CliError(EXIT.usage, `--kind is text or images (got ${JSON.stringify(kind)})`);
    if (values.labels !== undefined && kind !== 'images') throw new CliError(EXIT.usage, '--labels goes with --kind images (an IDX pair)');
    const file = args[0];
    const name = ((values.name as string | undefined) ?? basename(file)).trim();
    if (!name || name.length > 80) throw new CliError(EXIT.usage, '--name is 1 to 80 characters');
    const main = { file, size: await sizeOf(file) };
    let pieces: Piece[] = [main], type = kind === 'text' ? 'text/plain; charset=utf-8' : 'application/octet-stream';
    if (values.labels !== undefined) {
      const labels = values.labels as string;
      ({ pieces, type } = multipart(main, { file: labels, size: await sizeOf(labels) }));
    }
    const total = pieces.reduce((n, p) => n + lengthOf(p), 0);
    const client = api();
    const bar = out.progress(basename(file), total, 'bytes');
    const query = `kind=${kind}&name=${encodeURIComponent(name)}`;
    const res = await client.request('POST', `/api/datasets?${query}`, {
      what: `upload ${file}`, timeout: false, body: body(pieces, bar) as unknown as BodyInit, duplex: 'half',
      headers: { 'content-type': type, 'content-length': String(total) },
    } as RequestInit).finally(() => bar.finish());
    const { dataset } = (await res.json()) as { dataset: UploadInfo };
    out.result({ dataset }, dataset.id);
    if (!out.json) {
      out.note(`uploaded ${JSON.stringify(dataset.name)} (${dataset.kind}, ${formatBytes(dataset.bytes)}): `
        + `${dataset.records.train.toLocaleString('en')} training and ${dataset.records.validation.toLocaleString('en')} validation records`);
      out.note(`a job trains on it with "dataset": "${kind === 'text' ? 'text-upload' : 'image-upload'}", "upload": "${dataset.id}"`);
    }
    return EXIT.ok;
  },
};
