// Two server nodes share a real redis-server (started here). A job's keep-outs are in the store, so
// when its node goes away and the other node adopts the job, a member the first node evicted, and
// the newcomers from its address, are still kept out there, until the keep-out ends.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { KEEP_OUT_BASE_MS } from '../src/coordinator/penalties';
import type { ServerOptions } from '../src/app';
import { startRedisServer } from '../src/testing/redis-server';
import { waitFor, type SimVolunteer } from '../src/testing/sim-volunteer';
import { skippableClock, startTestServer, type TestServer } from '../src/testing/test-server';

let redis: Awaited<ReturnType<typeof startRedisServer>>;
let nodes: TestServer[] = [];

// Both nodes read one clock, which the test moves past a keep-out instead of waiting for it.
const time = skippableClock();

before(async () => {
  redis = await startRedisServer();
  // /32 networks: each loopback address is its own network, and keep-outs follow it to newcomers.
  const opts: ServerOptions = {
    redisUrl: redis.url, clock: time.clock, networkRules: { v4: 32, v6: 128 }, addressLimits: { connections: 100, jobShare: 1 },
    timing: { roundTimeoutMs: 10_000, barrierTimeoutMs: 10_000, loadTimeoutMs: 1_500 },
  };
  nodes = [await startTestServer({ ...opts, nodeId: 'node-a' }), await startTestServer({ ...opts, nodeId: 'node-b' })];
});
after(async () => {
  for (const n of nodes) await n.stop();
  redis?.stop();
});

const endReason = (s: SimVolunteer) => (s.events.find((e) => e.name === 'job:end')?.payload as { reason: string } | undefined)?.reason;

test('a job adopted by another node keeps the members its first node kept out', { timeout: 90_000 }, async () => {
  const [a, b] = nodes;
  // Under minWorkers no round runs: the joiner is asked to load the seed at once.
  const job = await b.createJob({ minWorkers: 2, maxWorkers: 4, H: 1, trust: 'trusted', targetSteps: 100_000 });
  const stalls = await b.volunteer({ localAddress: '127.0.0.11', clientId: 'stalling-id-00001' });
  stalls.holdLoad = true;
  assert.equal((await stalls.request(job.id)).ok, true);
  await waitFor('the joiner that never loads is evicted', () => endReason(stalls), 20_000);
  assert.match(endReason(stalls)!, /model load timed out/);

  // Its node goes away (its lease released); node a adopts the job from the store.
  await b.stop();
  nodes = [a];
  const back = await a.volunteer({ localAddress: '127.0.0.11', clientId: 'stalling-id-00001' });
  const fresh = await a.volunteer({ localAddress: '127.0.0.11', clientId: 'fresh-id-000000002' });
  // Before node a holds the job the request fails otherwise; once it does, the keep-out answers.
  const refused = await waitFor('node a takes the job over', async () => {
    const r = await back.request(job.id);
    return r.ok || r.error.code === 'rate_limited' ? r : null;
  }, 30_000, 250);
  // Before: node a let it in at once.
  assert.equal(!refused.ok && refused.error.code, 'rate_limited', JSON.stringify(refused));
  assert.match(!refused.ok ? refused.error.message : '', /kept out for \d+ s more after 1 fault\(s\), the last: model load timed out/);
  const newcomer = await fresh.request(job.id);
  assert.match(!newcomer.ok ? newcomer.error.message : '', /a member from your address is kept out for \d+ s more \(model load timed out\)/);

  // Node a's clock moved past the 10 s keep-out: both may join.
  time.skip(KEEP_OUT_BASE_MS);
  for (const s of [back, fresh]) assert.equal((await s.request(job.id)).ok, true, 'its keep-out is over');
  await a.stopJobs();
});
