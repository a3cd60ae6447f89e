// A researcher posts only what they change: the server fills in every default, stores the whole
// spec and returns it; a bad field is refused with its path and nothing is stored.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { jobSpecSchema } from '@tabfleet/protocol';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

test('a job that names only its model is created with every default filled in, and reads back the same', async () => {
  const created = await server.api('/api/jobs', { method: 'POST', json: { preset: 'mlp-fashion' } });
  assert.equal(created.status, 201, created.text);
  const id = created.body.job.id as string;
  const read = await server.api(`/api/jobs/${encodeURIComponent(id)}`);
  assert.equal(read.status, 200);
  const spec = read.body.job.spec;
  assert.deepEqual(spec, created.body.job.spec);
  assert.equal(spec.dataset, 'fashion-mnist');
  assert.equal(spec.strategy, 'localsgd');
  assert.deepEqual(spec.hyperparameters, { optimizer: 'sgd', lr: 0.05, batchSize: 32, momentum: 0.9, weightDecay: 0, outerLr: 0.7, outerMomentum: 0.9 });
  assert.equal(spec.targetEpochs, 1);
  assert.deepEqual([spec.minWorkers, spec.maxWorkers, spec.trust, spec.pacing, spec.aggregation], [1, 8, 'untrusted', 'auto', 'centered-clip']);
  // The stored spec is the whole job: parsing it again changes nothing.
  assert.deepEqual(jobSpecSchema.parse(spec), jobSpecSchema.parse({ preset: 'mlp-fashion' }));
  assert.equal((await server.api(`/api/jobs/${id}/stop`, { method: 'POST' })).status, 200);
});

test('a minimal spec with a bad field is refused with the field\'s path, and nothing is stored', async () => {
  const before = await server.store.digest();
  for (const [body, message] of [
    [{ preset: 'mlp-fashion', hyperparameters: { lr: 'fast' } }, /job spec: hyperparameters\.lr: /],
    [{ preset: 'mlp-fashion', hyperparameters: { batchsize: 16 } }, /job spec: hyperparameters: Unrecognized key: "batchsize"/],
    [{ preset: 'gpt', gpt: { layers: 2, heads: 3, width: 64, context: 32 } }, /job spec: gpt\.width: width must be a multiple of heads/],
    [{ dataset: 'fashion-mnist' }, /job spec: preset: /],
  ] as const) {
    const r = await server.api('/api/jobs', { method: 'POST', json: body });
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.body.error.code, 'bad_request');
    assert.match(r.body.error.message, message);
  }
  assert.equal(await server.store.digest(), before, 'refused specs store nothing');
});
