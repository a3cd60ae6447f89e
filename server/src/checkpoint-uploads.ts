// Checkpoint uploads over HTTP. The round's uploader says how many bytes its checkpoint has (the
// `checkpoint:upload` event with `bytes`) and the ack hands it a per-upload URL and token; it PUTs
// the file in byte ranges (Content-Range), each written to `<dir>/<id>.part` as it arrives (never the
// whole model in memory). After a dropped connection it asks (GET) how much the server holds and
// sends the rest: what arrived before the drop is kept. Once every byte is in, the job's coordinator
// checks the file (checkpoints.ts: the job's model, then the evaluators' agreed digest) before the
// store takes it. Uploads live in this node's memory and disk: a restart forgets them (their
// coordinators are gone too, and the next sync's checkpoint is asked again).
import { ProtocolError } from '@tabfleet/protocol';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';

/** The default ceiling on a job's model (f32 parameters) and on one checkpoint upload. */
export const DEFAULT_MAX_MODEL_BYTES = 2 * 2 ** 30;

/** What the server holds of an upload. */
export interface UploadProgress {
  bytes: number;
  received: number;
}

interface OpenUpload extends UploadProgress {
  jobId: string;
  seq: number;
  token: Buffer;
  file: string;
  /** A PUT is writing to it (one at a time, so ranges never interleave). */
  busy: boolean;
  /** Every byte is in: the coordinator takes the file (and may refuse it, rejecting). */
  complete(file: string): Promise<void>;
  /** Bytes were written (the upload's deadline runs from the last ones, not the last whole chunk). */
  progressed(): void;
}

/** What the job's coordinator hears of an upload it opened. */
export interface UploadListener {
  complete(file: string): Promise<void>;
  progressed(): void;
}

/** A byte range `start`–`end` (inclusive) of a file of `total` bytes, as Content-Range says it. */
export interface ByteRange {
  start: number;
  end: number;
  total: number;
}

/** Parses `bytes START-END/TOTAL`; throws bad_request for anything else. */
export function parseContentRange(header: string | undefined): ByteRange {
  const m = /^bytes (\d{1,16})-(\d{1,16})\/(\d{1,16})$/.exec(header ?? '');
  if (!m) throw new ProtocolError('bad_request', 'a checkpoint chunk needs Content-Range: bytes START-END/TOTAL');
  const [start, end, total] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (end < start) throw new ProtocolError('bad_request', `Content-Range ${header}: its end is before its start`);
  return { start, end, total };
}

export class CheckpointUploads {
  private readonly uploads = new Map<string, OpenUpload>();

  /**
   * `dir`: where parts are written (emptied now: parts of a previous run have no coordinator);
   * `urlOf`: the URL an uploader PUTs upload `id` to.
   */
  constructor(private readonly dir: string, readonly maxModelBytes: number, private readonly urlOf: (id: string) => string) {
    rmSync(dir, { recursive: true, force: true });
  }

  /**
   * Opens an upload of `bytes` for the checkpoint of `seq` of `jobId`: its URL and the token that alone
   * may write to it. `maxBytes`: the most the job's checkpoint can take (protocol's maxCheckpointBytes:
   * its parameters, which the server's model limit admitted, and the strategy state a joiner needs).
   */
  begin(jobId: string, seq: number, bytes: number, maxBytes: number, listener: UploadListener): { id: string; url: string; token: string } {
    if (bytes > maxBytes) throw new ProtocolError('too_large', `a checkpoint of ${bytes} bytes is over the ${maxBytes} this job's model can take (parameters, strategy state, header)`);
    const id = `cu-${randomBytes(8).toString('hex')}`;
    const token = randomBytes(24);
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const file = join(this.dir, `${id}.part`);
    writeFileSync(file, new Uint8Array(0), { mode: 0o600 });
    this.uploads.set(id, { jobId, seq, bytes, received: 0, token, file, busy: false, complete: listener.complete, progressed: listener.progressed });
    return { id, url: this.urlOf(id), token: token.toString('hex') };
  }

  /** Gives up upload `id` (its checkpoint was lost or the job ended): its part is deleted. */
  cancel(id: string): void {
    const u = this.uploads.get(id);
    if (!u) return;
    this.uploads.delete(id);
    rmSync(u.file, { force: true });
  }

  /** What the server holds of upload `id`, for its uploader. */
  progress(id: string, token: string): UploadProgress {
    const u = this.authorized(id, token);
    return { bytes: u.bytes, received: u.received };
  }

  /**
   * Writes one chunk (`range` of the body) at its offset, which must be what the server holds so far.
   * Bytes are kept as they are written, so a connection dropped mid-chunk leaves what arrived. The
   * last byte hands the file to the coordinator, whose refusal (a file that is not the job's model)
   * is thrown here.
   */
  async write(id: string, token: string, range: ByteRange, body: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): Promise<UploadProgress & { complete: boolean }> {
    const u = this.authorized(id, token);
    if (range.total !== u.bytes) throw new ProtocolError('bad_request', `Content-Range total ${range.total}: this upload is of ${u.bytes} bytes`);
    if (range.end >= u.bytes) throw new ProtocolError('bad_request', `Content-Range end ${range.end} is past the upload's last byte ${u.bytes - 1}`);
    if (range.start !== u.received) throw new ProtocolError('conflict', `the server holds ${u.received} bytes of this upload: send from byte ${u.received}`);
    if (u.busy) throw new ProtocolError('conflict', 'another request is writing to this upload');
    u.busy = true;
    const givenUp = () => new ProtocolError('conflict', `checkpoint upload ${id} was given up`);
    // Given up before its part could be opened: the part is gone, which is that, not a server fault.
    const fh = await open(u.file, 'r+').catch((err: unknown) => {
      u.busy = false;
      throw this.uploads.get(id) === u ? err : givenUp();
    });
    const end = range.end + 1;
    try {
      for await (const chunk of body) {
        if (u.received + chunk.byteLength > end) throw new ProtocolError('bad_request', `the body is longer than its Content-Range (${end - range.start} bytes)`);
        for (let off = 0; off < chunk.byteLength; ) {
          const { bytesWritten } = await fh.write(chunk, off, chunk.byteLength - off, u.received);
          off += bytesWritten;
          u.received += bytesWritten;
        }
        // The deadline runs from the last bytes, not the last whole chunk: a chunk sent over a slow link
        // (or read by a busy server) keeps its uploader while it keeps coming.
        if (u.received < u.bytes && this.uploads.get(id) === u) u.progressed();
      }
    } finally {
      u.busy = false;
      await fh.close();
    }
    // Given up while this chunk was being written (the uploader was asked again, left, or ran out of time).
    if (this.uploads.get(id) !== u) throw givenUp();
    if (u.received !== end) throw new ProtocolError('bad_request', `the body ended at byte ${u.received} before its Content-Range's end: send from byte ${u.received}`);
    if (u.received < u.bytes) return { bytes: u.bytes, received: u.received, complete: false };
    this.uploads.delete(id);
    await u.complete(u.file);
    return { bytes: u.bytes, received: u.received, complete: true };
  }

  private authorized(id: string, token: string): OpenUpload {
    const u = this.uploads.get(id);
    if (!u) throw new ProtocolError('unknown_job', `no checkpoint upload ${id.slice(0, 40)} open on this server (finished, given up, or never begun)`);
    const given = Buffer.from(/^[0-9a-f]{48}$/.test(token) ? token : '', 'hex');
    if (given.length !== u.token.length || !timingSafeEqual(given, u.token)) throw new ProtocolError('unauthorized', 'missing or wrong upload token (Authorization: Bearer <token>)');
    return u;
  }
}
