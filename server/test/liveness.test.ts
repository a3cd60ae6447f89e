// One member must not stall a job: each fault below is bounded by a deadline that follows the other
// members' pace (the configured timeouts here are 30 s; the job's own rounds take milliseconds), the
// offender is removed and kept out when it comes straight back, and the job goes on.
import assert from 'node:assert/strict';
import { after, afterEach, before, test } from 'node:test';
import type { WorkerRow } from '@tabfleet/protocol';
import { waitFor, type SimVolunteer } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

const CAP_MS = 30_000;
let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: CAP_MS, barrierTimeoutMs: CAP_MS, loadTimeoutMs: CAP_MS } });
});
after(() => server.stop());
// Each test's job stops and its volunteers close, so the next test's pace is not the previous one's load.
let cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups) await c();
  cleanups = [];
});

const ended = (s: SimVolunteer) => (s.events.find((e) => e.name === 'job:end')?.payload as { reason: string } | undefined)?.reason;

/** Two honest members that have set the job's pace (a few quick syncs), and the job. */
async function pacedJob(spec: object = {}) {
  const job = await server.createJob({ minWorkers: 2, maxWorkers: 4, H: 1, targetSteps: 100_000, ...spec });
  const honest = [await server.volunteer(), await server.volunteer()];
  cleanups.push(async () => {
    await server.api(`/api/jobs/${job.id}/stop`, { method: 'POST' });
    for (const s of honest) s.close();
  });
  for (const s of honest) await s.request(job.id);
  await waitFor('the pace is set', () => honest[0].committed.length >= 6);
  return { job, honest };
}

/** Asserts the offender is evicted within `withinMs` (well under the 30 s cap) and may not rejoin at once. */
async function evictedAndKeptOut(offender: SimVolunteer, jobId: string, reason: RegExp, withinMs: number) {
  const t0 = Date.now();
  await waitFor('the offender is evicted', () => ended(offender), withinMs);
  assert.match(ended(offender)!, reason);
  const again = await offender.request(jobId);
  assert.equal(!again.ok && again.error.code, 'rate_limited', JSON.stringify(again));
  assert.match(!again.ok ? again.error.message : '', /kept out for \d+ s more/);
  return Date.now() - t0;
}

test('a member that answers every round with round:failed is evicted (the star round pins it) and syncs commit again', async () => {
  const { job, honest } = await pacedJob();
  const failing = await server.volunteer();
  failing.failRound = () => 'peer_lost';
  await failing.request(job.id);
  const ms = await evictedAndKeptOut(failing, job.id, /failed a star round/, 20_000);
  // The researcher's worker table shows the fault against its identity.
  const rows = (await server.api(`/api/jobs/${job.id}`)).body.workers as WorkerRow[];
  assert.deepEqual(rows.filter((w) => w.faults !== 0).map((w) => [w.volunteerId, w.state, w.faults]), [[failing.volunteerId, 'left', 1]]);
  const before = honest[0].committed.length;
  await waitFor('syncs commit again', () => honest[0].committed.length >= before + 3);
  console.log(`round:failed forever: evicted after ${ms} ms`);
});

test('a joiner that never loads does not hold the round: the others go on, and it is evicted at the load pace', async () => {
  const { job, honest } = await pacedJob({ checkpointEvery: 1 });
  const joiner = await server.volunteer();
  joiner.holdLoad = true;
  await joiner.request(job.id);
  await waitFor('asked to load', () => joiner.events.some((e) => e.name === 'model:load'));
  const before = honest[0].committed.length;
  await waitFor('syncs go on while it loads', () => honest[0].committed.length >= before + 2, 15_000);
  await evictedAndKeptOut(joiner, job.id, /model load timed out/, 20_000);
});

test('an uploader that withholds its checkpoint is evicted at the upload pace and the next checkpoint comes from another member', async () => {
  const { job, honest } = await pacedJob({ checkpointEvery: 1 });
  const withholder = await server.volunteer({ checkpoint: () => null });
  await withholder.request(job.id);
  await evictedAndKeptOut(withholder, job.id, /did not upload the checkpoint of sync \d+ in time/, 25_000);
  const lost = (await server.api(`/api/jobs/${job.id}`)).body.job.seq;
  await waitFor('a later checkpoint', async () => (await server.api(`/api/jobs/${job.id}`)).body.job.latestCheckpoint?.seq > lost, 10_000);
  assert.ok(honest.some((s) => s.uploads.some((seq) => seq > lost)));
});

test('a silent ring member is evicted at the round pace, not after the configured minute', async () => {
  const { job, honest } = await pacedJob();
  const silent = await server.volunteer();
  await silent.request(job.id);
  await waitFor('it takes part in a sync', () => silent.committed.length >= 1);
  silent.holdRounds = true;
  const ms = await evictedAndKeptOut(silent, job.id, /missed the deadline of round/, CAP_MS - 5_000);
  assert.ok(ms < CAP_MS / 2, `${ms} ms`);
  const before = honest[0].committed.length;
  await waitFor('syncs commit again', () => honest[0].committed.length >= before + 2).catch((e) => {
    throw new Error(`${e.message}; honest ends ${honest.map(ended)}; server log:\n${server.logTail(60)}`);
  });
});

test('a store that fails to write the final checkpoint is retried, and the job still ends with it', async () => {
  // Only the last sync is checkpointed: without retries the job would wait for it forever.
  const job = await server.createJob({ minWorkers: 2, maxWorkers: 2, H: 1, targetSteps: 12, checkpointEvery: 1000 });
  const put = server.store.putCheckpoint.bind(server.store);
  let failures = 0;
  server.store.putCheckpoint = async (...args) => {
    if (failures < 2) {
      failures++;
      throw new Error('disk full (injected)');
    }
    return put(...args);
  };
  const sims = [await server.volunteer(), await server.volunteer()];
  try {
    for (const s of sims) await s.request(job.id);
    await waitFor('the job is done', async () => (await server.api(`/api/jobs/${job.id}`)).body.job.state === 'done', 20_000);
  } finally {
    server.store.putCheckpoint = put;
    for (const s of sims) s.close();
  }
  const done = (await server.api(`/api/jobs/${job.id}`)).body.job;
  assert.equal(failures, 2);
  assert.equal(done.latestCheckpoint.seq, done.seq, 'the final sync is checkpointed');
  assert.match(await (await fetch(`${server.url}/metrics`)).text(), /^tabfleet_checkpoint_store_failures_total 2$/m);
});
