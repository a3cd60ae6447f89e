// `tabfleet download ID`: a checkpoint (safetensors) streamed to a file, hashed on the way, and kept
// only when its SHA-256 equals the one the server recorded for it.
import { CHECKPOINT_SHA256_HEADER, CHECKPOINT_SYNC_HEADER, type JobSummary } from '@tabfleet/protocol';
import { createHash } from 'node:crypto';
import { rmSync } from 'node:fs';
import { open, rename, rm, type FileHandle } from 'node:fs/promises';
import { jobPath, networkError } from '../api';
import type { Command } from '../command';
import { CliError, EXIT } from '../errors';
import { formatBytes } from '../output';

/** The digest the server recorded: the header, else (an older server) the job's latest checkpoint when that is the one fetched. */
async function recordedDigest(res: Response, fetchJob: () => Promise<JobSummary>, seq: number): Promise<string | null> {
  const header = res.headers.get(CHECKPOINT_SHA256_HEADER);
  if (header) return header.toLowerCase();
  const latest = (await fetchJob()).latestCheckpoint;
  return latest && latest.seq === seq ? latest.sha256 : null;
}

export const download: Command = {
  name: 'download',
  usage: 'tabfleet download ID [--sync N] [-o FILE]',
  summary: 'download a checkpoint (safetensors) and check its SHA-256 against the server\'s',
  help: [
    'The latest checkpoint, or that of sync N (the server keeps the latest 5 and every 50th).',
    'Written to FILE (default ID-syncN.safetensors) only once its SHA-256 equals the server\'s record; a mismatch is exit 1.',
    'Loads in Python with safetensors.numpy.load_file or safetensors.torch.load_file.',
  ],
  options: { sync: { type: 'string' }, output: { type: 'string', short: 'o' } },
  async run({ args, values, out, api }) {
    if (args.length !== 1) throw new CliError(EXIT.usage, 'give one job id: tabfleet download ID [--sync N] [-o FILE]');
    const id = args[0];
    let path = jobPath(id, '/checkpoint');
    if (values.sync !== undefined) {
      const n = Number(values.sync);
      if (!Number.isInteger(n) || n < 0 || n > 999_999_999) throw new CliError(EXIT.usage, `--sync takes a sync number (got ${JSON.stringify(values.sync)})`);
      path = jobPath(id, `/checkpoints/${n}`);
    }
    const client = api();
    const res = await client.request('GET', path, { what: `checkpoint of ${id}`, timeout: false });
    const seq = Number(res.headers.get(CHECKPOINT_SYNC_HEADER) ?? values.sync);
    const file = (values.output as string | undefined) ?? `${id}-sync${seq}.safetensors`;
    const part = `${file}.part`;
    const total = Number(res.headers.get('content-length')) || null;
    const bar = out.progress(`sync ${seq}`, total, 'bytes');
    const hash = createHash('sha256');
    let bytes = 0;
    let sink: FileHandle;
    try {
      sink = await open(part, 'w', 0o644);
    } catch (e) {
      await res.body?.cancel();
      throw new CliError(EXIT.usage, `cannot write ${part}: ${(e as Error).message}`);
    }
    // Ctrl-C mid-download leaves no partial file behind.
    const interrupted = () => {
      rmSync(part, { force: true });
      process.exit(130);
    };
    process.once('SIGINT', interrupted);
    try {
      try {
        for await (const chunk of res.body!) {
          hash.update(chunk);
          bytes += chunk.byteLength;
          await sink.write(chunk);
          bar.update(bytes);
        }
      } catch (e) {
        throw e instanceof CliError || (e as NodeJS.ErrnoException).syscall === 'write' ? e : networkError(client.creds.server, e);
      } finally {
        await sink.close();
      }
      bar.finish();
      if (total !== null && bytes !== total) throw new CliError(EXIT.network, `the download of sync ${seq} ended after ${bytes} of ${total} bytes; nothing kept`);
      const sha256 = hash.digest('hex');
      const expected = await recordedDigest(res, async () => (await client.json<{ job: JobSummary }>('GET', jobPath(id), undefined, `job ${id}`)).job, seq);
      if (expected !== null && expected !== sha256) {
        throw new CliError(EXIT.failure, `checkpoint of sync ${seq}: SHA-256 ${sha256} is not the server's ${expected}; nothing kept`);
      }
      await rename(part, file);
      if (expected === null) out.note(`the server reports no digest for sync ${seq}: the file is not verified`);
      const verified = expected !== null;
      out.result({ jobId: id, seq, file, bytes, sha256, verified },
        `${file}: sync ${seq}, ${formatBytes(bytes)}, sha256 ${sha256}${verified ? ' (equals the server\'s)' : ' (not verified)'}`);
      return EXIT.ok;
    } finally {
      process.off('SIGINT', interrupted);
      await rm(part, { force: true });
    }
  },
};
