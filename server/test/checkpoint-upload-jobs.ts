// Helpers of the checkpoint upload tests: a job whose sync 1 is checkpointed, with simulated
// volunteers that withhold their Socket.IO upload so the test uploads over HTTP in their place.
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'node:http';
import type { JobSpec, RoundBegin } from '@tabfleet/protocol';
import { checkpointOf, waitFor, type SimVolunteer } from '../src/testing/sim-volunteer';
import type { TestServer } from '../src/testing/test-server';

/** Sync 1 of a new two-member job, committed and checkpointed: its uploader, its model, and the job. */
export async function uploaderOfSyncOne(server: TestServer) {
  const job = await server.createJob({ minWorkers: 2, maxWorkers: 2, H: 1, checkpointEvery: 1, targetSteps: 1000 });
  const sims = [await server.volunteer({ checkpoint: () => null }), await server.volunteer({ checkpoint: () => null })];
  for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
  const begin = (s: SimVolunteer) => s.events.find((e) => e.name === 'round:begin' && (e.payload as RoundBegin).seq === 1)?.payload as RoundBegin | undefined;
  const uploader = await waitFor('sync 1 commits with an uploader', () => sims.find((s) => begin(s)?.uploader === s.volunteerId && s.applied.has(1)), 20_000);
  const other = sims.find((s) => s !== uploader)!;
  const spec = uploader.assignment!.job.spec as JobSpec;
  const model = uploader.applied.get(1)!.slice();
  return { jobId: job.id, spec, uploader, other, model, file: checkpointOf(spec, model) };
}

/** Asks for an HTTP upload of `bytes` as the uploader of sync 1: the ack with the URL and token. */
export async function beginUpload(uploader: SimVolunteer, jobId: string, bytes: number) {
  return uploader.emit('checkpoint:upload', { jobId, seq: 1, step: uploader.step, bytes });
}

export interface Reply {
  status: number;
  body: any;
}

/** One PUT of `body` as bytes `start`–`start + body.length - 1` of `total` (a Content-Range, unless given). */
export async function putChunk(url: string, token: string, body: Uint8Array, start: number, total: number, contentRange?: string): Promise<Reply> {
  const res = await fetch(url, {
    method: 'PUT', body: body.slice(), headers: { authorization: `Bearer ${token}`, 'content-range': contentRange ?? `bytes ${start}-${start + body.byteLength - 1}/${total}` },
  });
  return { status: res.status, body: await res.json() };
}

/** What the server holds of an upload, asked with `token`. */
export async function progress(url: string, token: string): Promise<Reply> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  return { status: res.status, body: await res.json() };
}

/**
 * A PUT of bytes `start`–`end` of which only `sent` bytes go out before the connection drops (the
 * client destroys its socket once the server holds them).
 */
export async function droppedPut(url: string, token: string, file: Uint8Array, start: number, end: number, sent: number): Promise<void> {
  const req = request(url, {
    method: 'PUT', headers: { authorization: `Bearer ${token}`, 'content-range': `bytes ${start}-${end}/${file.byteLength}`, 'content-length': end - start + 1 },
  });
  req.on('error', () => {}); // the drop itself
  req.write(file.subarray(start, start + sent));
  await waitFor('the server holds the bytes sent before the drop', async () => (await progress(url, token)).body.received === start + sent, 10_000);
  req.destroy();
}

/** Files of uploads in progress or not stored (none once an upload is stored, refused or given up). */
export const incomingFiles = (server: TestServer) => {
  const dir = join(server.dataDir, 'incoming');
  return existsSync(dir) ? readdirSync(dir) : [];
};
