// Several nodes (Redis): each exports its own /metrics, which promtool accepts. A job's series come
// from the node that coordinates it alone; sockets are counted where they are connected; the jobs by
// state are the cluster's, alike on every node.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { parseSamples, sampleValue, type Sample } from '../src/testing/exposition';
import { checkMetrics } from '../src/testing/promtool';
import { startRedisServer } from '../src/testing/redis-server';
import { RingOracle, SimVolunteer, waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let redis: Awaited<ReturnType<typeof startRedisServer>>;
let nodes: TestServer[] = [];
const sims: SimVolunteer[] = [];

before(async () => {
  redis = await startRedisServer();
  nodes = [await startTestServer({ redisUrl: redis.url, nodeId: 'node-a' }), await startTestServer({ redisUrl: redis.url, nodeId: 'node-b' })];
});

after(async () => {
  for (const s of sims) s.close();
  for (const n of nodes) await n.stop();
  redis.stop();
});

async function scrape(node: TestServer): Promise<{ text: string; samples: Sample[] }> {
  const text = await (await fetch(`${node.url}/metrics`)).text();
  return { text, samples: parseSamples(text) };
}

test('each node exports its own /metrics: the job\'s series on the node that runs it, sockets where they are', async () => {
  const [a, b] = nodes;
  const job = await a.createJob({ minWorkers: 4, maxWorkers: 4, trust: 'trusted' });
  const oracle = new RingOracle();
  for (const n of [a, b, a, b]) sims.push(new SimVolunteer({ url: n.url, oracle }));
  for (const s of sims) await s.connected();
  for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
  await waitFor('2 syncs', () => sims.every((s) => s.committed.length >= 2), 30_000);

  const [fromA, fromB] = await Promise.all([scrape(a), scrape(b)]);
  for (const [name, { text }] of [['node-a', fromA], ['node-b', fromB]] as const) {
    const checked = await checkMetrics(text);
    assert.equal(checked.code, 0, `${name}: ${checked.output}`);
    assert.equal(checked.output.trim(), '', `${name}: ${checked.output}`);
  }
  // The job was created on node a, which holds its lease and runs its coordinator.
  assert.ok(sampleValue(fromA.samples, 'tabfleet_job_rounds_total', { job_id: job.id, outcome: 'committed' }) >= 2);
  assert.equal(sampleValue(fromA.samples, 'tabfleet_job_workers', { job_id: job.id }), 4);
  assert.deepEqual(fromB.samples.filter((s) => s.labels.job_id === job.id), [], 'node b does not run the job');
  assert.equal(sampleValue(fromA.samples, 'tabfleet_volunteers_connected'), 2);
  assert.equal(sampleValue(fromB.samples, 'tabfleet_volunteers_connected'), 2);
  // The store's view, written behind the coordinator: both nodes come to say the job runs.
  await waitFor('both nodes count the job running', async () => {
    const both = await Promise.all([scrape(a), scrape(b)]);
    return both.every(({ samples }) => sampleValue(samples, 'tabfleet_jobs', { state: 'running' }) === 1);
  });
});
