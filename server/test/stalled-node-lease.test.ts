// Two server nodes (server/src/main.ts processes) on a real redis-server. A node whose event loop
// stalls past its job lease (here: SIGSTOP; in the two-node coordinator bench, a node admitting
// thousands of volunteers at once) keeps its jobs: the other node sees it still listening for calls
// and does not adopt them, and the stalled node renews its lease when it runs again, its members
// never told their job moved. A node that is gone (SIGKILL) still hands its jobs over.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { createClient } from 'redis';
import { startRedisServer } from '../src/testing/redis-server';
import { RingOracle, SimVolunteer, waitFor } from '../src/testing/sim-volunteer';
import { BASE_JOB } from '../src/testing/test-server';
import { startServerProcess, type ServerProcess } from './server-process';

const TOKEN = 'cli-test-token-0123456789';
const cleanups: (() => unknown)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

const urlOf = (p: ServerProcess) => /\[server\] ready (\S+)/.exec(p.output())![1];

test('a stalled node keeps its jobs past its lease; a killed one hands them over', async () => {
  const redis = await startRedisServer();
  cleanups.push(() => redis.stop());
  const r = createClient({ url: redis.url });
  await r.connect();
  cleanups.push(() => r.quit());
  const a = await startServerProcess(['--redis', redis.url, '--node', 'node-a']);
  cleanups.push(() => a.stop());
  const b = await startServerProcess(['--redis', redis.url, '--node', 'node-b']);
  cleanups.push(() => b.stop());

  // A job created on node a is owned by it; one volunteer joins it there (two are needed for a round).
  const res = await fetch(`${urlOf(a)}/api/jobs`, {
    method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...BASE_JOB, dataset: 'synthetic-blobs', minWorkers: 2, maxWorkers: 2 }),
  });
  assert.equal(res.status, 201, await res.clone().text());
  const jobId = ((await res.json()) as { job: { id: string } }).job.id;
  assert.equal(await r.get(`tf:owner:${jobId}`), 'node-a');
  const sim = new SimVolunteer({ url: urlOf(a), oracle: new RingOracle() });
  cleanups.push(() => sim.close());
  await sim.connected();
  assert.equal((await sim.request(jobId)).ok, true);
  await waitFor('the volunteer loaded the model', () => sim.events.some((e) => e.name === 'model:load'));

  // Node a stops running: its lease lapses while its connections (its subscription for calls) stay open.
  a.child.kill('SIGSTOP');
  await waitFor('node a\'s lease lapsed', async () => (await r.get(`tf:owner:${jobId}`)) === null, 60_000);
  // Node b's sweeps find the lapsed lease and ask whether node a still listens (PUBSUB NUMSUB, a command
  // nothing else here sends): twice, so at least one whole sweep of node b ran after the lapse.
  const numsubCalls = async () => Number(/cmdstat_pubsub\|numsub:calls=(\d+)/.exec(await r.info('commandstats'))?.[1] ?? 0);
  await waitFor('node b looked at the lapsed lease twice (or took it)', async () => (await numsubCalls()) >= 2 || (await r.get(`tf:owner:${jobId}`)) !== null, 60_000);
  assert.equal(await r.get(`tf:owner:${jobId}`), null, 'node b must not take the job of a node that still listens');
  a.child.kill('SIGCONT');
  await waitFor('node a renewed its lease', async () => (await r.get(`tf:owner:${jobId}`)) === 'node-a', 60_000);
  const worker = await waitFor('the volunteer is still the job\'s worker, as node b answers', async () => {
    const w = await fetch(`${urlOf(b)}/api/jobs/${jobId}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    const body = (await w.json()) as { job?: { workers: number } };
    return body.job?.workers === 1 ? body.job : null;
  }, 60_000);
  assert.equal(worker.workers, 1);
  assert.deepEqual(sim.events.filter((e) => e.name === 'job:end'), [], 'its members were never told the job moved');

  // A node that is gone no longer listens: node b adopts its job once the lease lapses.
  a.child.kill('SIGKILL');
  await waitFor('node b adopted the job of the killed node', async () => (await r.get(`tf:owner:${jobId}`)) === 'node-b', 60_000);
});
