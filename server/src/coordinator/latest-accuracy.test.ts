// The job's latest accuracy (its summary, the dashboard's figure) is the newest sync's evaluated: an
// evaluation that ends after a newer sync's (a slow evaluator; it has its bound to report) does not
// replace it. Before, the last evaluation to end won: the dashboard of a job that had reached its
// 0.82 target showed 76.85%, its first evaluation's figure, recorded last beside a busy machine.
// Fake time, the coordinator with a real store.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { capabilitiesSchema, jobSpecSchema, modelDigest, type VolunteerServerEvents } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { SqliteStore } from '../store/sqlite';
import type { JobRecord } from '../store/store';
import { SIM_CAPABILITIES, checkpointOf, initialParams } from '../testing/sim-volunteer';
import { JobCoordinator } from './job-coordinator';
import type { CoordinatorDeps } from './types';

test('an evaluation that ends after a newer sync\'s does not replace the job\'s latest accuracy', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tabfleet-latest-accuracy-'));
  const store = new SqliteStore(dir);
  const sent: { to: string; event: keyof VolunteerServerEvents; payload: any }[] = [];
  const deps: CoordinatorDeps = {
    store, clock: new FakeClock(), timing: { roundTimeoutMs: 10_000, barrierTimeoutMs: 10_000, loadTimeoutMs: 10_000 },
    toVolunteer: (to, event, payload) => {
      for (const id of Array.isArray(to) ? to : [to]) sent.push({ to: id, event, payload });
    },
    toDashboards: () => {}, watched: () => false, checkpointUrl: (job, seq) => `http://x/${job}/${seq}`, count: () => {}, log: () => {},
  };
  const job: JobRecord = {
    id: 'job-t', name: 't', state: 'waiting', createdAt: 0, updatedAt: 0, seq: 0, step: 0,
    spec: jobSpecSchema.parse({
      preset: 'mlp-fashion', strategy: 'localsgd', H: 1, pacing: 'fixed', minWorkers: 3, maxWorkers: 3, targetSteps: 100, checkpointEvery: 1, evalEverySteps: 1, trust: 'trusted',
    }),
  };
  await store.createJob(job);
  const c = await JobCoordinator.load(job, deps);
  const members = ['a', 'b', 'c'];
  const last = (to: string, event: string) => [...sent].reverse().find((s) => s.to === to && s.event === event)?.payload;
  const sync = (seq: number) => {
    for (const id of members) c.handle(id, 'round:ready', { jobId: job.id, seq, step: seq });
    const r = last('a', 'round:begin');
    assert.equal(r.seq, seq);
    for (const id of members) {
      c.handle(id, 'round:result', { jobId: job.id, roundId: r.roundId, checksum: 'abcdef01', step: seq, metrics: { loss: 1, samples: 1, wallMs: 1, bytesSent: 0, bytesReceived: 0 } });
    }
    assert.equal(r.evaluators.length, 3);
    return r as { seq: number; evaluators: string[]; uploader: string };
  };
  /** `evaluators` of sync r.seq report its model at `accuracy`; the uploader uploads it once it has. */
  const evaluate = (r: { seq: number; evaluators: string[]; uploader: string }, evaluators: string[], accuracy: number) => {
    const model = initialParams(job.spec, r.seq);
    for (const id of evaluators) c.handle(id, 'metrics', { jobId: job.id, seq: r.seq, checksum: modelDigest(model), accuracy, loss: 1 });
    if (evaluators.includes(r.uploader)) c.handle(r.uploader, 'checkpoint:upload', { jobId: job.id, seq: r.seq, step: r.seq, data: checkpointOf(job.spec, model) });
  };
  for (const id of members) {
    c.join({ volunteerId: id, capabilities: capabilitiesSchema.parse(SIM_CAPABILITIES) });
    c.handle(id, 'model:loaded', { jobId: job.id, seq: 0, checksum: 'abcdef01' });
  }
  const r1 = sync(1);
  // Two of sync 1's three evaluators report, the uploader among them: the checkpoint is agreed and stored, and sync 2 goes on.
  const slow = r1.evaluators.find((id) => id !== r1.uploader)!;
  evaluate(r1, r1.evaluators.filter((id) => id !== slow), 0.6);
  await c.flushed();
  const r2 = sync(2);
  evaluate(r2, r2.evaluators, 0.8);
  assert.equal(c.summary().latestAccuracy, 0.8);
  evaluate(r1, [slow], 0.6);
  assert.equal(c.summary().latestAccuracy, 0.8, 'sync 1\'s evaluation, ended last, does not replace sync 2\'s');
  await c.flushed();
  assert.equal(await store.latestAccuracy(job.id), 0.8, 'nor in the store, where a restarted node reads it');
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});
