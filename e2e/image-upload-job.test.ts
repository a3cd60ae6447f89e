// A researcher's own image set end to end against the real server: Fashion-MNIST's 10k test images,
// uploaded as the gzip IDX pair a researcher would have, become a dataset; an MLP job names it; two
// volunteers (the worker runtime on the CPU backend, in-memory links) train on their shards of its
// training part and are scored on its held-out tenth, whose accuracy rises well past chance.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import { FASHION_MNIST_FILES } from '@tabfleet/data';
import { FASHION_MNIST_DIR } from '@tabfleet/distributed/node';
import { startTestServer, waitFor, type TestServer } from '@tabfleet/server/testing';
import { nodeVolunteer } from '@tabfleet/worker/testing';

let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 20_000, barrierTimeoutMs: 60_000, loadTimeoutMs: 30_000 } });
});
after(() => server.stop());

test('two volunteers train an MLP on an uploaded IDX image set and are scored on its held-out images', { timeout: 240_000 }, async () => {
  const form = new FormData();
  for (const [part, file] of [['images', FASHION_MNIST_FILES.testImages], ['labels', FASHION_MNIST_FILES.testLabels]]) {
    form.set(part, new Blob([readFileSync(join(FASHION_MNIST_DIR, file))]), file);
  }
  const res = await fetch(`${server.url}/api/datasets?kind=images&name=clothes`, { method: 'POST', headers: { authorization: 'Bearer test-token' }, body: form });
  const upload = (await res.json()).dataset;
  assert.equal(res.status, 201, JSON.stringify(upload));
  assert.deepEqual(upload.records, { train: 9000, validation: 1000 });

  const job = await server.createJob({
    preset: 'mlp-fashion', dataset: 'image-upload', upload: upload.id, strategy: 'localsgd', H: 4,
    hyperparameters: { lr: 0.1, batchSize: 32 }, minWorkers: 2, maxWorkers: 2, targetSteps: 120, evalEverySteps: 40,
  });
  const net = new MemoryNetwork();
  const vols = [0, 1].map(() => nodeVolunteer(server.url, net));
  try {
    await waitFor('the job is done', async () => (await server.api(`/api/jobs/${job.id}`)).body.job.state === 'done', 220_000, 250);
    for (const v of vols) assert.equal(v.runtime.status.lastError, null, `${v.runtime.status.volunteerId}: ${v.runtime.status.lastError}`);
    const points = (await server.api(`/api/jobs/${job.id}/metrics`)).body.points as { step: number; accuracy: number | null }[];
    const accuracy = points.filter((p) => p.accuracy !== null).map((p) => p.accuracy!);
    console.log(`held-out accuracy: ${accuracy.map((a) => a.toFixed(3)).join(' → ')}`);
    // Ten classes: chance is 0.1. 120 steps of 2 × 32 images reach about 0.7 on Fashion-MNIST.
    assert.ok(accuracy.length >= 2 && accuracy.at(-1)! > 0.55, `held-out accuracy ${accuracy.join(' → ')}`);
  } finally {
    for (const v of vols) v.runtime.stop();
    await server.api(`/api/jobs/${job.id}/stop`, { method: 'POST' }).catch(() => {});
  }
});
