// Checkpoints over HTTP in pieces: downloads answer Range requests (a joiner resumes a dropped load
// where it stopped) and are streamed from the store's file, and uploads are PUT in byte ranges to the
// per-upload URL the uploader was handed (checkpoint-uploads.ts), with its token.
import { CHECKPOINT_SHA256_HEADER, CHECKPOINT_SYNC_HEADER, flatLengthOf, layoutOf, parameterCount, ProtocolError, type JobSpec } from '@tabfleet/protocol';
import { createHash } from 'node:crypto';
import { createReadStream, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { CorruptCheckpointError } from '../store/store';
import { parseContentRange } from '../checkpoint-uploads';
import { sendJson } from './respond';
import type { Route, RouteContext } from './routes';

/** A job whose f32 parameters are over the server's limit is refused when it is created. */
export function checkModelSize(spec: JobSpec, maxModelBytes: number): void {
  const bytes = flatLengthOf(spec) * 4;
  if (bytes <= maxModelBytes) return;
  const mib = (b: number) => (b / 2 ** 20).toFixed(1);
  throw new ProtocolError('bad_request', `job spec: this model has ${parameterCount(layoutOf(spec)).toLocaleString('en')} parameters (${mib(bytes)} MiB of f32); `
    + `this server takes models of at most ${mib(maxModelBytes)} MiB`);
}

/**
 * The byte range a Range header asks of a file of `size` bytes: `bytes=START-[END]` or `bytes=-SUFFIX`;
 * null for no header (the whole file); 'unsatisfiable' for a range past the end or a form not served.
 */
export function requestedRange(header: string | undefined, size: number): { start: number; end: number } | null | 'unsatisfiable' {
  if (header === undefined) return null;
  const m = /^bytes=(\d{0,16})-(\d{0,16})$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return 'unsatisfiable';
  if (m[1] === '') {
    const suffix = Number(m[2]);
    return suffix === 0 || size === 0 ? 'unsatisfiable' : { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  return start >= size || end < start ? 'unsatisfiable' : { start, end };
}

/** Files whose bytes were checked against their recorded sha256 (path, size and mtime): each is hashed once per process, streamed. */
const checkedFiles = new Set<string>();

async function checkedFile(jobId: string, seq: number, path: string, sha256: string): Promise<number> {
  const st = statSync(path);
  const key = `${path}:${st.size}:${st.mtimeMs}`;
  if (checkedFiles.has(key)) return st.size;
  const hash = createHash('sha256');
  await pipeline(createReadStream(path), hash);
  if (hash.digest('hex') !== sha256) throw new CorruptCheckpointError(jobId, seq);
  if (checkedFiles.size > 256) checkedFiles.clear();
  checkedFiles.add(key);
  return st.size;
}

/**
 * A stored checkpoint, whole or the range asked: streamed from its file when the store keeps one,
 * read by ranges when the store offers that (Redis: only the chunks asked for), else sent from its bytes.
 */
export async function sendCheckpoint(ctx: RouteContext, req: IncomingMessage, res: ServerResponse, jobId: string, seq: number): Promise<void> {
  const file = await ctx.store.checkpointFile?.(jobId, seq);
  const ranges = file ? null : await ctx.store.checkpointRanges?.(jobId, seq);
  const bytes = file || ranges ? null : await ctx.store.readCheckpoint(jobId, seq);
  if (!file && !ranges && !bytes) throw new ProtocolError('unknown_job', `job ${jobId} has no checkpoint of sync ${seq}`);
  const size = file ? await checkedFile(jobId, seq, file.path, file.info.sha256) : ranges ? ranges.info.bytes : bytes!.byteLength;
  // The sync travels with the bytes: a client that asked for "the latest" knows which one it got.
  res.setHeader(CHECKPOINT_SYNC_HEADER, String(seq));
  // The store has checked the bytes against the digest it recorded, so their hash is that digest: a client checks its copy against it.
  res.setHeader(CHECKPOINT_SHA256_HEADER, (file ?? ranges)?.info.sha256 ?? createHash('sha256').update(bytes!).digest('hex'));
  res.setHeader('accept-ranges', 'bytes');
  res.setHeader('content-type', 'application/octet-stream');
  res.setHeader('content-disposition', `attachment; filename="${jobId}-sync${seq}.safetensors"`);
  const range = requestedRange(req.headers.range, size);
  if (range === 'unsatisfiable') {
    res.writeHead(416, { 'content-range': `bytes */${size}` }).end();
    return;
  }
  const { start, end } = range ?? { start: 0, end: size - 1 };
  res.writeHead(range ? 206 : 200, { 'content-length': end - start + 1, ...(range ? { 'content-range': `bytes ${start}-${end}/${size}` } : {}) });
  if (req.method === 'HEAD' || size === 0) return void res.end();
  if (bytes) return void res.end(bytes.subarray(start, end + 1));
  await pipeline(ranges ? Readable.from(ranges.read(start, end)) : createReadStream(file!.path, { start, end }), res);
}

/** The upload token, only from the Authorization header (never in a URL, where logs keep it). */
function uploadToken(req: IncomingMessage): string {
  const header = req.headers.authorization ?? '';
  return header.startsWith('Bearer ') ? header.slice(7) : '';
}

/** Upload ids as checkpoint-uploads.ts makes them. */
const UPLOAD_PATH = /^\/api\/checkpoint-uploads\/(cu-[0-9a-f]{16})$/;

export const CHECKPOINT_UPLOAD_ROUTES: [string, RegExp, Route][] = [
  // What the server holds of an upload: the uploader resumes from `received` after a dropped connection.
  ['GET', UPLOAD_PATH, async (ctx, req, res, [id]) => {
    sendJson(res, 200, ctx.checkpointUploads.progress(id, uploadToken(req)));
  }],
  // One chunk: Content-Range: bytes START-END/TOTAL, START being what the server holds.
  ['PUT', UPLOAD_PATH, async (ctx, req, res, [id]) => {
    const range = parseContentRange(req.headers['content-range']);
    sendJson(res, 200, await ctx.checkpointUploads.write(id, uploadToken(req), range, req));
  }],
];
