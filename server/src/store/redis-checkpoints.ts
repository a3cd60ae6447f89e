// Checkpoints in Redis, for the Redis store: each one's bytes in chunks of `chunkBytes` (default
// 8 MiB), never one value. A Redis string holds at most proto-max-bulk-len (512 MiB by default), and a
// model past the old 32 MiB ceiling (GPT-2 small with DiLoCo's outer momentum is about 1 GB) needs more.
// A file is stored a chunk at a time, so the node never holds it whole, and a ranged download reads only
// the chunks it covers (GETRANGE), once the whole was checked against its sha256 (once per process).
//
// Keys: `tf:ckpt:<job>` hashes sync → record (the CheckpointInfo, its chunk size and count, and the id
// of its data); the chunks are `tf:ckpt-data:<job>:<sync>:<data id>:<i>`. The record is written after
// its chunks and names them by a fresh id, so a reader sees whole checkpoints only, and a sync stored
// again never overwrites chunks a reader may be reading. Records from before chunking have no data id;
// their bytes are one value, `tf:ckpt-data:<job>:<sync>`, still read.
import type { CheckpointInfo } from '@tabfleet/protocol';
import { createHash, randomBytes } from 'node:crypto';
import { open, rm } from 'node:fs/promises';
import { commandOptions, type createClient } from 'redis';
import { checkpointsToPrune, CorruptCheckpointError, type CheckpointRanges, type CheckpointRetention } from './store';

type Client = ReturnType<typeof createClient>;

/** A chunk's bytes: well under Redis's default value limit, and a small share of any node's memory. */
export const REDIS_CHECKPOINT_CHUNK_BYTES = 8 * 2 ** 20;

interface StoredRecord extends CheckpointInfo {
  /** Absent: a record from before chunking, its bytes one value. */
  dataId?: string;
  chunkBytes?: number;
  chunks?: number;
}

/** Checkpoints whose bytes this process checked against their sha256 (a record's data id names its bytes for good). */
const checkedData = new Set<string>();

export class RedisCheckpoints {
  constructor(
    private readonly r: Client,
    private readonly retention: CheckpointRetention,
    private readonly chunkBytes = REDIS_CHECKPOINT_CHUNK_BYTES,
  ) {
    if (!(Number.isInteger(chunkBytes) && chunkBytes >= 1)) throw new Error(`checkpoint chunk size must be a positive integer of bytes, got ${chunkBytes}`);
  }

  async put(jobId: string, info: CheckpointInfo, data: Uint8Array): Promise<void> {
    await this.store(jobId, info, data.byteLength, async (at, length) => Buffer.from(data.buffer, data.byteOffset + at, length));
  }

  /** From a file (an HTTP upload's), a chunk at a time; the file is deleted once stored. */
  async putFile(jobId: string, info: CheckpointInfo, file: string): Promise<void> {
    const handle = await open(file, 'r');
    try {
      const { size } = await handle.stat();
      await this.store(jobId, info, size, async (at, length) => {
        const chunk = Buffer.allocUnsafe(length);
        const { bytesRead } = await handle.read(chunk, 0, length, at);
        if (bytesRead !== length) throw new Error(`checkpoint file ${file} ended at ${at + bytesRead} of ${size} bytes`);
        return chunk;
      });
    } finally {
      await handle.close();
    }
    await rm(file, { force: true });
  }

  async latest(jobId: string): Promise<CheckpointInfo | null> {
    const all = (await this.r.hVals(this.recordsKey(jobId))).map((t) => infoOf(JSON.parse(t) as StoredRecord));
    return all.reduce<CheckpointInfo | null>((best, c) => (!best || c.seq > best.seq ? c : best), null);
  }

  /** The whole checkpoint, checked against its sha256. */
  async read(jobId: string, seq: number): Promise<Uint8Array | null> {
    const rec = await this.record(jobId, seq);
    if (!rec) return null;
    const bytes = new Uint8Array(rec.bytes);
    const hash = createHash('sha256');
    let at = 0;
    for await (const chunk of this.chunks(jobId, rec, 0, rec.bytes - 1)) {
      bytes.set(chunk, at);
      hash.update(chunk);
      at += chunk.byteLength;
    }
    if (at !== rec.bytes || hash.digest('hex') !== rec.sha256) throw new CorruptCheckpointError(jobId, seq);
    return bytes;
  }

  /** Ranges of a checkpoint: its bytes checked once per process (streamed through the hash), then read as asked. */
  async ranges(jobId: string, seq: number): Promise<CheckpointRanges | null> {
    const rec = await this.record(jobId, seq);
    if (!rec) return null;
    const checkedAs = `${jobId}:${seq}:${rec.dataId ?? 'single'}:${rec.sha256}`;
    if (!checkedData.has(checkedAs)) {
      const hash = createHash('sha256');
      let length = 0;
      for await (const chunk of this.chunks(jobId, rec, 0, rec.bytes - 1)) {
        hash.update(chunk);
        length += chunk.byteLength;
      }
      if (length !== rec.bytes || hash.digest('hex') !== rec.sha256) throw new CorruptCheckpointError(jobId, seq);
      if (checkedData.size > 256) checkedData.clear();
      checkedData.add(checkedAs);
    }
    return { info: infoOf(rec), read: (start, end) => this.chunks(jobId, rec, start, end) };
  }

  /** Writes the chunks (`chunk(at, length)` gives each), then the record, then drops what it replaced and what retention no longer keeps. */
  private async store(jobId: string, info: CheckpointInfo, size: number, chunk: (at: number, length: number) => Promise<Buffer>): Promise<void> {
    const chunks = Math.max(1, Math.ceil(size / this.chunkBytes));
    const rec: StoredRecord = { ...info, bytes: size, dataId: randomBytes(6).toString('hex'), chunkBytes: this.chunkBytes, chunks };
    try {
      for (let i = 0; i < chunks; i++) {
        const at = i * this.chunkBytes;
        await this.r.set(chunkKey(jobId, rec, i), await chunk(at, Math.min(this.chunkBytes, size - at)));
      }
    } catch (e) {
      // No record names them yet: what was written goes, so a failed store leaves nothing behind.
      await this.r.del(dataKeys(jobId, rec)).catch(() => {});
      throw e;
    }
    const replaced = await this.record(jobId, info.seq);
    await this.r.hSet(this.recordsKey(jobId), String(info.seq), JSON.stringify(rec));
    if (replaced) await this.r.del(dataKeys(jobId, replaced));
    const drop = checkpointsToPrune((await this.r.hKeys(this.recordsKey(jobId))).map(Number), this.retention);
    if (!drop.length) return;
    const dropped = (await this.r.hmGet(this.recordsKey(jobId), drop.map(String))).filter((t): t is string => !!t).map((t) => JSON.parse(t) as StoredRecord);
    await this.r.hDel(this.recordsKey(jobId), drop.map(String));
    if (dropped.length) await this.r.del(dropped.flatMap((d) => dataKeys(jobId, d)));
  }

  private async record(jobId: string, seq: number): Promise<StoredRecord | null> {
    const text = await this.r.hGet(this.recordsKey(jobId), String(seq));
    return text ? (JSON.parse(text) as StoredRecord) : null;
  }

  private recordsKey(jobId: string): string {
    return `tf:ckpt:${jobId}`;
  }

  /** Bytes `start`–`end` (inclusive) of the checkpoint, a chunk's part at a time. Bytes missing: corrupt. */
  private async *chunks(jobId: string, rec: StoredRecord, start: number, end: number): AsyncGenerator<Uint8Array> {
    if (end < start) return;
    const part = async (key: string, from: number, to: number) => {
      const b = await this.r.getRange(commandOptions({ returnBuffers: true }), key, from, to);
      if (b.byteLength !== to - from + 1) throw new CorruptCheckpointError(jobId, rec.seq);
      return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    };
    if (rec.dataId === undefined) {
      yield await part(`tf:ckpt-data:${jobId}:${rec.seq}`, start, end);
      return;
    }
    const size = rec.chunkBytes!;
    for (let i = Math.floor(start / size); i * size <= end; i++) {
      yield await part(chunkKey(jobId, rec, i), Math.max(start - i * size, 0), Math.min(end - i * size, size - 1));
    }
  }
}

function chunkKey(jobId: string, rec: StoredRecord, i: number): string {
  return `tf:ckpt-data:${jobId}:${rec.seq}:${rec.dataId}:${i}`;
}

function dataKeys(jobId: string, rec: StoredRecord): string[] {
  if (rec.dataId === undefined) return [`tf:ckpt-data:${jobId}:${rec.seq}`];
  return Array.from({ length: rec.chunks ?? 1 }, (_, i) => chunkKey(jobId, rec, i));
}

/** The record less what only the store needs. */
function infoOf(rec: StoredRecord): CheckpointInfo {
  const { dataId: _id, chunkBytes: _size, chunks: _count, ...info } = rec;
  return info;
}
