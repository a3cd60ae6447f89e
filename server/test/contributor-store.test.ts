// Both stores keep contributors, display names, reputations and a job's record (its notice among its
// mutable fields) the same way: SQLite, and Redis (a real redis-server started here), through the same Store calls.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createClient } from 'redis';
import { RedisStore } from '../src/store/redis';
import { startRedisServer } from '../src/testing/redis-server';
import { SqliteStore } from '../src/store/sqlite';
import type { ContributorRecord, JobRecord, Store } from '../src/store/store';

let redis: Awaited<ReturnType<typeof startRedisServer>>;
let redisClient: ReturnType<typeof createClient>;
const dir = mkdtempSync(join(tmpdir(), 'tabfleet-store-'));
const stores: Store[] = [];

before(async () => {
  redis = await startRedisServer();
  redisClient = createClient({ url: redis.url });
  await redisClient.connect();
  stores.push(new SqliteStore(dir), new RedisStore(redisClient));
});
after(async () => {
  for (const s of stores) await s.close();
  await redisClient?.quit();
  redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const record = (jobId: string, clientId: string, n: number): ContributorRecord => ({
  jobId, clientId, volunteerId: `v-${clientId}`, adapter: 'sim', backend: 'webgpu', step: n, bytesSent: 10 * n, bytesReceived: 20 * n,
  samples: 30 * n, syncs: n, computeMs: 100 * n, firstAt: 1000 + n, lastAt: 2000 + n, leftReason: n % 2 ? 'left' : null,
});

for (const kind of ['sqlite', 'redis'] as const) {
  test(`${kind}: contributors per job, totals per client id over jobs, display names`, async () => {
    const store = stores.find((s) => s.kind === kind)!;
    assert.deepEqual(await store.contributors('job-a'), []);
    assert.equal(await store.volunteerCredit('ada'), null);
    await store.saveContributors([record('job-a', 'bob', 2), record('job-a', 'ada', 1)]);
    await store.saveContributors([record('job-a', 'ada', 3)]); // replaced, not added
    await store.saveContributors([record('job-b', 'ada', 4)]);
    assert.deepEqual(await store.contributors('job-a'), [record('job-a', 'bob', 2), record('job-a', 'ada', 3)], 'first to join first');
    assert.deepEqual(await store.volunteerCredit('ada'), { displayName: null, jobs: 2, samples: 210, syncs: 7, computeMs: 700 });
    await store.setDisplayName('ada', 'Ada L.');
    assert.deepEqual(await store.displayNames(['ada', 'bob', 'ada']), new Map([['ada', 'Ada L.']]));
    assert.equal((await store.volunteerCredit('ada'))?.displayName, 'Ada L.');
    await store.setDisplayName('carol', 'Carol');
    assert.deepEqual(await store.volunteerCredit('carol'), { displayName: 'Carol', jobs: 0, samples: 0, syncs: 0, computeMs: 0 });
    await store.setDisplayName('carol', null);
    assert.equal(await store.volunteerCredit('carol'), null);
    const before = await store.digest();
    await store.saveContributors([record('job-a', 'bob', 5)]);
    assert.notEqual(await store.digest(), before, 'the digest covers contributors');
  });

  test(`${kind}: a job's mutable fields replace the stored ones: a notice is kept, and dropped once cleared`, async () => {
    const store = stores.find((s) => s.kind === kind)!;
    const job: JobRecord = {
      id: `job-n-${kind}`, name: 'notice', spec: { preset: 'mlp-fashion' } as JobRecord['spec'], state: 'running', createdAt: 1, updatedAt: 1, seq: 0, step: 0,
    };
    await store.createJob(job);
    assert.equal((await store.getJob(job.id))?.notice, undefined);
    const held = { ...job, seq: 4, step: 32, updatedAt: 5, notice: 'sync 4: target accuracy held back, vouched for by members without standing' };
    await store.updateJob(held);
    assert.deepEqual(await store.getJob(job.id), held);
    assert.equal((await store.listJobs()).find((j) => j.id === job.id)?.notice, held.notice);
    const { notice: _cleared, ...ended } = { ...held, state: 'done' as const, seq: 6, step: 48, updatedAt: 9, endReason: 'target accuracy reached' };
    await store.updateJob(ended);
    assert.deepEqual(await store.getJob(job.id), ended, 'the notice went with the update that cleared it');
  });

  test(`${kind}: the latest accuracy is the newest sync's that has one, whenever it was recorded`, async () => {
    const store = stores.find((s) => s.kind === kind)!;
    assert.equal(await store.latestAccuracy('job-m'), null);
    const point = (seq: number, accuracy: number | null) => ({ seq, step: seq, time: seq, loss: 1, accuracy, samplesPerSec: null, bytesSent: null, workers: 1 });
    await store.addMetric('job-m', point(1, 0.5));
    await store.addMetric('job-m', point(2, 0.8425));
    // More points without accuracy than Redis reads in one go.
    for (let i = 3; i < 600; i++) await store.addMetric('job-m', point(i, null));
    assert.equal(await store.latestAccuracy('job-m'), 0.8425);
    // A slow evaluator's: sync 610's evaluation recorded after sync 620's.
    await store.addMetric('job-m', point(620, 0.86));
    await store.addMetric('job-m', point(610, 0.7));
    assert.equal(await store.latestAccuracy('job-m'), 0.86);
  });

  test(`${kind}: reputations add up across concurrent changes and survive in the store`, async () => {
    const store = stores.find((s) => s.kind === kind)!;
    assert.deepEqual(await store.reputations(['dora']), new Map());
    // Two jobs adding at once: increments, not last-writer-wins.
    await Promise.all([...Array.from({ length: 5 }, () => store.addReputation('dora', { verified: 1 })), store.addReputation('dora', { fault: { reason: 'lied as an owner', at: 1234 } })]);
    await store.addReputation('dora', { verified: 2 });
    assert.deepEqual(
      await store.reputations(['dora', 'nobody', 'dora']),
      new Map([['dora', { clientId: 'dora', verified: 7, verifiedSinceFault: 2, faults: 1, lastFault: 'lied as an owner', lastFaultAt: 1234 }]]),
    );
    const before = await store.digest();
    await store.addReputation('eve', { fault: { reason: 'bad evidence', at: 99 } });
    assert.deepEqual((await store.reputations(['eve'])).get('eve'), { clientId: 'eve', verified: 0, verifiedSinceFault: 0, faults: 1, lastFault: 'bad evidence', lastFaultAt: 99 });
    assert.notEqual(await store.digest(), before, 'the digest covers reputations');
  });
}

for (const kind of ['sqlite', 'redis'] as const) {
  // Issue 34: display names were never pruned (280 rows/s from one address). The bound is 10,000
  // (MAX_UNPROVEN_NAMES); 5 here.
  test(`${kind}: names of ids without a committed sync are kept for the 5 most recently named; ids with one keep theirs`, async () => {
    const client = createClient({ url: `${redis.url}/1` }); // its own keyspace: the other Redis store uses db 0
    const store: Store = kind === 'sqlite' ? new SqliteStore(join(dir, 'names'), { maxUnprovenNames: 5 }) : new RedisStore(await client.connect(), { maxUnprovenNames: 5 });
    try {
      await store.saveContributors([record('job-n', 'proven', 1), { ...record('job-n', 'joined', 1), syncs: 0 }]);
      await store.setDisplayName('proven', 'Proven'); // named first, and a member of a committed sync
      await store.setDisplayName('joined', 'Joined'); // in a job, but no sync committed with it yet
      const unproven = Array.from({ length: 12 }, (_, i) => `u${i}`);
      for (const u of unproven) await store.setDisplayName(u, u.toUpperCase());
      const all = () => store.displayNames(['proven', 'joined', 'later', ...unproven]);
      assert.deepEqual([...(await all()).keys()].sort(), ['proven', 'u10', 'u11', 'u7', 'u8', 'u9']);
      // Setting a name again makes it the newest.
      await store.setDisplayName('u7', 'U7 again');
      await store.setDisplayName('later', 'Later');
      assert.deepEqual([...(await all()).keys()].sort(), ['later', 'proven', 'u10', 'u11', 'u7', 'u9']);
      // An id whose sync commits keeps its name from then on.
      await store.saveContributors([record('job-n', 'u9', 2)]);
      for (const u of ['v1', 'v2', 'v3', 'v4', 'v5', 'v6']) await store.setDisplayName(u, u);
      const names = await store.displayNames(['proven', 'u9', 'u7', 'later', 'v1', 'v2', 'v6']);
      assert.deepEqual([...names.keys()].sort(), ['proven', 'u9', 'v2', 'v6']);
    } finally {
      if (kind === 'sqlite') await store.close();
      else await client.quit();
    }
  });
}
