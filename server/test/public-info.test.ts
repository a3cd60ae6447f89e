// What the volunteer page shows before anyone presses Contribute, without a token: who runs the
// server, the open jobs in the order a new volunteer is offered them, and what each costs per sync
// (estimated until a sync has been measured).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { estimateSyncBytes, jobSpecSchema, type PublicInfo } from '@tabfleet/protocol';
import { waitFor } from '../src/testing/sim-volunteer';
import { BASE_JOB, startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer({ name: 'Lab GPU pool', operator: 'Example University ML group' });
});
after(() => server.stop());

const info = async (): Promise<PublicInfo> => (await fetch(`${server.url}/api/public/info`)).json();

test('the server names itself and lists open jobs in the order volunteers are offered them', async () => {
  assert.deepEqual((await info()).server, { name: 'Lab GPU pool', operator: 'Example University ML group' });
  assert.deepEqual((await info()).jobs, []);
  const full = await server.createJob({ name: 'already has one', minWorkers: 1, maxWorkers: 2, compression: 'fp16' });
  const sim = await server.volunteer({ trainMs: 20 });
  await sim.request(full.id);
  await waitFor('a measured sync', () => sim.committed.length >= 1);
  const needy = await server.createJob({ name: 'needs two', minWorkers: 2, maxWorkers: 4, compression: 'dgc', strategy: 'diloco' });
  const stopped = await server.createJob({ name: 'stopped' });
  await server.api(`/api/jobs/${stopped.id}/stop`, { method: 'POST' });

  const { jobs } = await info();
  assert.deepEqual(jobs.map((j) => j.name), ['needs two', 'already has one'], 'the neediest first; ended jobs are not offered');
  const [first, second] = jobs;
  assert.equal(first.modelBytes, 203_530 * 4);
  const spec = jobSpecSchema.parse({ ...BASE_JOB, minWorkers: 2, maxWorkers: 4, compression: 'dgc', strategy: 'diloco' });
  assert.equal(first.syncBytesMeasured, false);
  assert.equal(first.syncBytes, estimateSyncBytes(spec, 2));
  assert.equal(second.syncBytesMeasured, true, 'a job that synced reports what its members sent');
  assert.equal(second.syncBytes, 203_530 * 4, 'the simulated member reports its whole flat vector (what it "sent")');
  assert.equal(second.workers, 1);
});

test('the per-sync estimate follows the wire formats', () => {
  const base = { preset: 'cnn-fashion', sparsity: 0.99 } as const;
  // Dense ring: 2(N−1)/N of the vector per member.
  assert.equal(estimateSyncBytes({ ...base, compression: 'none' }, 4), Math.round(1.5 * 52_298 * 4));
  assert.equal(estimateSyncBytes({ ...base, compression: 'fp16' }, 2), 52_298 * 2);
  // DGC at 99%: 523 kept pairs of f16 + 1-byte gap, forwarded N−1 times; past 99.2% gaps take 2 bytes.
  assert.equal(estimateSyncBytes({ ...base, compression: 'dgc' }, 3), 523 * 3 * 2);
  assert.equal(estimateSyncBytes({ ...base, compression: 'dgc', sparsity: 0.999 }, 3), 53 * 4 * 2);
  // One member alone still pays for a ring of two once someone joins.
  assert.equal(estimateSyncBytes({ ...base, compression: 'none' }, 1), estimateSyncBytes({ ...base, compression: 'none' }, 2));
});
