// A job's `evalExamples` against the real server: its evaluators read only the first that many
// examples of the test set. Three examples give accuracies of 0, 1/3, 2/3 or 1, which the 2,048 test
// examples of synthetic-blobs (the whole set, as before the field) almost never do.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import type { MetricPoint } from '@tabfleet/protocol';
import { startTestServer, waitFor, type TestServer } from '@tabfleet/server/testing';
import { nodeVolunteer } from '@tabfleet/worker/testing';

let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 20_000, barrierTimeoutMs: 60_000, loadTimeoutMs: 30_000 } });
});
after(() => server.stop());

test('evalExamples: each evaluation reads the first that many test examples', { timeout: 120_000 }, async () => {
  const job = await server.createJob({
    trust: 'trusted', dataset: 'synthetic-blobs', strategy: 'localsgd', H: 2, pacing: 'fixed', hyperparameters: { lr: 0.05, batchSize: 32 },
    minWorkers: 2, maxWorkers: 2, targetSteps: 12, evalEverySteps: 2, evalExamples: 3,
  });
  const net = new MemoryNetwork();
  const vols = [0, 1].map(() => nodeVolunteer(server.url, net, { jobId: job.id }));
  try {
    await waitFor('the job is done', async () => (await server.api(`/api/jobs/${job.id}`)).body.job.state === 'done', 100_000, 100);
    const points = (await server.api(`/api/jobs/${job.id}/metrics`)).body.points as MetricPoint[];
    const accuracies = points.map((p) => p.accuracy).filter((a): a is number => a !== null);
    assert.ok(accuracies.length >= 4, `evaluated syncs: ${accuracies.length}`);
    for (const a of accuracies) assert.ok([0, 1, 2, 3].some((k) => Math.abs(3 * a - k) < 1e-6), `accuracy ${a} is not a count of 3 examples`);
  } finally {
    for (const v of vols) v.runtime.stop();
  }
});
