// The scheduler: volunteers go to the job that needs them most and can hold its model; idle
// volunteers are offered the next job that opens.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { PRESET_FLAT_LENGTHS } from '@tabfleet/protocol';
import { SIM_CAPABILITIES, waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

test('an idle volunteer is assigned as soon as a job is created', async () => {
  const idle = await server.volunteer();
  const ack = await idle.request();
  assert.deepEqual(ack, { ok: true, assigned: false });
  const job = await server.createJob({ minWorkers: 1, maxWorkers: 1 });
  await waitFor('job:assign', () => idle.assignment);
  assert.equal(idle.assignment!.job.id, job.id);
  await server.api(`/api/jobs/${job.id}/stop`, { method: 'POST' });
});

test('jobs below their minimum are filled first, and an adapter too small for a model is not given it', async () => {
  const big = await server.createJob({ preset: 'mlp-fashion', minWorkers: 1, maxWorkers: 4 });
  const needy = await server.createJob({ preset: 'cnn-fashion', minWorkers: 2, maxWorkers: 4 });
  const first = await server.volunteer();
  await first.request();
  assert.equal(first.assignment!.job.id, needy.id, 'the job under its minimum gets the first volunteer');

  // Holds the CNN (52k floats) but not the MLP (204k floats).
  const small = { ...SIM_CAPABILITIES, limits: { maxStorageBufferBindingSize: PRESET_FLAT_LENGTHS['cnn-fashion'] * 4, maxBufferSize: 1 << 20 } };
  const weak = await server.volunteer({ capabilities: small });
  const refused = await weak.request(big.id);
  assert.equal(!refused.ok && refused.error.code, 'capacity');
  assert.match(!refused.ok ? refused.error.message : '', /cannot hold the mlp-fashion model/);
  assert.equal((await weak.request()).ok, true);
  assert.equal(weak.assignment!.job.id, needy.id);
  const detail = (await server.api(`/api/jobs/${needy.id}`)).body;
  assert.equal(detail.workers.length, 2);
});
