// An HTTP checkpoint upload's deadline runs from the last bytes written: a large model (or one chunk)
// whose bytes keep coming is not cut off at the upload bound, and an upload that stalls is (its
// uploader evicted, its part file deleted); one that trickles is, at its whole deadline. Fake time,
// the coordinator with a real store and upload registry.
import assert from 'node:assert/strict';
import { pbkdf2 } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { capabilitiesSchema, jobSpecSchema, modelDigest, type VolunteerServerEvents } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { CheckpointUploads } from '../checkpoint-uploads';
import { SqliteStore } from '../store/sqlite';
import type { JobRecord } from '../store/store';
import { SIM_CAPABILITIES, checkpointOf, initialParams } from '../testing/sim-volunteer';
import { MIN_UPLOAD_BYTES_PER_S } from './checkpoints';
import { JobCoordinator } from './job-coordinator';
import type { CoordinatorDeps } from './types';

const UPLOAD_BOUND_MS = 3_000;

/** Members a and b commit sync 1 (checkpointed) and its evaluators report the seed model: the uploader's upload is open. */
async function openUpload() {
  const dir = mkdtempSync(join(tmpdir(), 'tabfleet-upload-deadline-'));
  const store = new SqliteStore(dir);
  const clock = new FakeClock();
  const sent: { to: string; event: keyof VolunteerServerEvents; payload: any }[] = [];
  const uploads = new CheckpointUploads(join(dir, 'incoming'), 2 ** 30, (id) => `http://x/api/checkpoint-uploads/${id}`);
  const deps: CoordinatorDeps = {
    store, clock, timing: { roundTimeoutMs: 10_000, barrierTimeoutMs: 10_000, loadTimeoutMs: UPLOAD_BOUND_MS },
    toVolunteer: (to, event, payload) => {
      for (const id of Array.isArray(to) ? to : [to]) sent.push({ to: id, event, payload });
    },
    toDashboards: () => {}, watched: () => false, checkpointUrl: (job, seq) => `http://x/${job}/${seq}`, count: () => {}, log: () => {}, checkpointUploads: uploads,
  };
  const job: JobRecord = {
    id: 'job-t', name: 't', state: 'waiting', createdAt: 0, updatedAt: 0, seq: 0, step: 0,
    spec: jobSpecSchema.parse({ preset: 'mlp-fashion', strategy: 'localsgd', H: 1, pacing: 'fixed', minWorkers: 2, maxWorkers: 2, targetSteps: 100, checkpointEvery: 1, trust: 'trusted' }),
  };
  await store.createJob(job);
  const c = await JobCoordinator.load(job, deps);
  const last = (to: string, event: string) => [...sent].reverse().find((s) => s.to === to && s.event === event)?.payload;
  for (const id of ['a', 'b']) {
    c.join({ volunteerId: id, capabilities: capabilitiesSchema.parse(SIM_CAPABILITIES) });
    c.handle(id, 'model:loaded', { jobId: job.id, seq: 0, checksum: 'abcdef01' });
    c.handle(id, 'round:ready', { jobId: job.id, seq: 1, step: 1 });
  }
  const r1 = last('a', 'round:begin');
  for (const id of ['a', 'b']) {
    c.handle(id, 'round:result', { jobId: job.id, roundId: r1.roundId, checksum: 'abcdef01', step: 1, metrics: { loss: 1, samples: 1, wallMs: 1, bytesSent: 0, bytesReceived: 0 } });
  }
  const model = initialParams(job.spec, 1);
  for (const id of r1.evaluators) c.handle(id, 'metrics', { jobId: job.id, seq: 1, checksum: modelDigest(model), accuracy: 0.5, loss: 1 });
  const file = checkpointOf(job.spec, model);
  const ack = c.handle(r1.uploader, 'checkpoint:upload', { jobId: job.id, seq: 1, step: 1, bytes: file.byteLength }) as { url: string; token: string };
  const id = ack.url.split('/').pop()!;
  const chunk = (start: number, end: number) => uploads.write(id, ack.token, { start, end: end - 1, total: file.byteLength }, [file.subarray(start, end)]);
  /** The whole file as one chunk (one Content-Range) whose body arrives as `body` yields it. */
  const oneChunk = (body: AsyncIterable<Uint8Array>) => uploads.write(id, ack.token, { start: 0, end: file.byteLength - 1, total: file.byteLength }, body);
  const incoming = () => (existsSync(join(dir, 'incoming')) ? readdirSync(join(dir, 'incoming')) : []);
  const cleanup = async () => {
    await c.flushed();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { c, clock, store, uploads, id, uploader: r1.uploader as string, file, chunk, oneChunk, last, incoming, cleanup };
}

test('an upload whose chunks keep coming is not cut off at the upload bound', async () => {
  const t = await openUpload();
  const quarter = Math.ceil(t.file.byteLength / 4);
  for (let start = 0; start < t.file.byteLength; start += quarter) {
    await t.clock.advance(UPLOAD_BOUND_MS - 500); // each chunk inside the bound from the last one; all of them past it
    await t.chunk(start, Math.min(start + quarter, t.file.byteLength));
    assert.equal(t.last(t.uploader, 'job:end'), undefined, `still a member after the chunk at ${start}`);
  }
  await t.c.flushed();
  assert.equal((await t.store.latestCheckpoint('job-t'))?.seq, 1, 'the checkpoint is stored');
  assert.deepEqual(t.incoming(), []);
  await t.cleanup();
});

test('an upload that stalls past the bound from its last chunk is given up and its uploader evicted', async () => {
  const t = await openUpload();
  await t.chunk(0, 1_000);
  await t.clock.advance(UPLOAD_BOUND_MS - 1);
  assert.equal(t.last(t.uploader, 'job:end'), undefined);
  await t.clock.advance(1);
  assert.match(t.last(t.uploader, 'job:end').reason, /did not upload the checkpoint of sync 1 in time/);
  assert.deepEqual(t.incoming(), [], 'its part file is deleted');
  await assert.rejects(t.chunk(1_000, 2_000), /no checkpoint upload .* open on this server/);
  await t.cleanup();
});

test('one chunk whose bytes keep coming past the bound keeps its uploader (the deadline follows bytes, not whole chunks)', async () => {
  const t = await openUpload();
  const quarter = Math.ceil(t.file.byteLength / 4);
  const file = t.file;
  const clock = t.clock;
  // A slow link (or a busy server reading it): each piece inside the bound from the last one, the whole chunk past it.
  async function* trickle() {
    for (let start = 0; start < file.byteLength; start += quarter) {
      await clock.advance(UPLOAD_BOUND_MS - 500);
      yield file.subarray(start, Math.min(start + quarter, file.byteLength));
    }
  }
  const done = await t.oneChunk(trickle());
  assert.equal(done.complete, true);
  assert.equal(t.last(t.uploader, 'job:end'), undefined, 'the uploader is still a member');
  await t.c.flushed();
  assert.equal((await t.store.latestCheckpoint('job-t'))?.seq, 1, 'the checkpoint is stored');
  await t.cleanup();
});

test('a chunk whose upload is given up before its part is opened is refused as given up, not a server fault', async () => {
  const t = await openUpload();
  // The part is opened on the thread pool; with the pool busy (other uploads' writes), the give-up
  // below deletes the part before the open runs. Here the pool is held by key derivations.
  const poolBusy = Array.from({ length: 4 }, () => new Promise((done) => pbkdf2('x', 'y', 200_000, 32, 'sha256', done)));
  const refused = assert.rejects(t.chunk(0, 1_000), (err: Error & { code?: string }) => err.code === 'conflict' && /was given up/.test(err.message));
  t.uploads.cancel(t.id); // the coordinator gave it up (deadline, job end) while the request was arriving
  await Promise.all([refused, ...poolBusy]);
  assert.deepEqual(t.incoming(), []);
  await t.cleanup();
});

test('an upload that trickles bytes inside each bound is given up at its whole deadline (the bound plus its bytes at the floor rate)', async () => {
  const t = await openUpload();
  const deadline = UPLOAD_BOUND_MS + Math.ceil((t.file.byteLength / MIN_UPLOAD_BYTES_PER_S) * 1000);
  const every = UPLOAD_BOUND_MS - 500;
  // 100 bytes inside each bound: held to the deadline from the last bytes alone, this held the job for ever.
  let elapsed = 0;
  for (let sent = 0; elapsed + every < deadline; sent += 100) {
    await t.clock.advance(every);
    elapsed += every;
    await t.chunk(sent, sent + 100);
    assert.equal(t.last(t.uploader, 'job:end'), undefined, `still a member at ${elapsed} ms`);
  }
  await t.clock.advance(deadline - elapsed - 1);
  assert.equal(t.last(t.uploader, 'job:end'), undefined, 'a member until the whole deadline');
  await t.clock.advance(1);
  assert.match(t.last(t.uploader, 'job:end')?.reason ?? 'still a member', /did not upload the checkpoint of sync 1 in time \(slower than 32 KiB\/s/);
  assert.deepEqual(t.incoming(), [], 'its part file is deleted');
  await t.cleanup();
});
