// DashboardWatch: a room counts as watched while a dashboard here is in it, or while another node's
// latest announcement (younger than TTL_MS) names it; announcements go out at once when rooms change
// (one per tick) and every ANNOUNCE_MS.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Clock } from '../coordinator/types';
import { LocalCluster, type ClusterNews } from './cluster';
import { ANNOUNCE_MS, DashboardWatch, TTL_MS } from './watch';

class FakeClock implements Clock {
  t = 0;
  private timers: { at: number; fn: () => void }[] = [];
  now(): number {
    return this.t;
  }
  after(ms: number, fn: () => void): () => void {
    const timer = { at: this.t + ms, fn };
    this.timers.push(timer);
    return () => void (this.timers = this.timers.filter((x) => x !== timer));
  }
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      const next = this.timers.filter((x) => x.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!next) break;
      this.timers = this.timers.filter((x) => x !== next);
      this.t = next.at;
      next.fn();
    }
    this.t = end;
  }
}

test('rooms watched here or announced by another node count until the announcement is TTL_MS old', async () => {
  const clock = new FakeClock();
  const cluster = new LocalCluster('node-a');
  const sent: ClusterNews[] = [];
  cluster.onBroadcast((m) => sent.push(m));
  const here = new Set<string>();
  const watch = new DashboardWatch(cluster, clock, () => here, () => {});
  watch.start();
  assert.deepEqual(sent, [{ kind: 'watching', nodeId: 'node-a', rooms: [] }], 'announced at start');
  assert.equal(watch.watched('job:x'), false);

  here.add('job:x');
  watch.changed();
  watch.changed();
  await Promise.resolve();
  assert.equal(sent.length, 2, 'changes in one tick: one announcement');
  assert.deepEqual(sent[1], { kind: 'watching', nodeId: 'node-a', rooms: ['job:x'] });
  assert.equal(watch.watched('job:x'), true);

  // Another node's dashboards; this node's own announcements are not "another node".
  await cluster.broadcast({ kind: 'watching', nodeId: 'node-b', rooms: ['job:y', 'jobs'] });
  assert.equal(watch.watched('job:y'), true);
  assert.equal(watch.watched('jobs'), true);
  here.delete('job:x');
  assert.equal(watch.watched('job:x'), false);
  clock.advance(ANNOUNCE_MS);
  assert.equal(sent.filter((m) => m.kind === 'watching' && m.nodeId === 'node-a').length, 3, 'announced again every ANNOUNCE_MS');
  clock.advance(TTL_MS);
  assert.equal(watch.watched('job:y'), false, 'node-b went quiet: its rooms stop counting');
  watch.stop();
});

test('two nodes on Redis: a dashboard on one node sees a job run on the other (updates and the worker table)', { timeout: 60_000 }, async (t) => {
  const { startRedisServer } = await import('../testing/redis-server');
  const { startTestServer } = await import('../testing/test-server');
  const { waitFor } = await import('../testing/sim-volunteer');
  const { io } = await import('socket.io-client');
  const { NAMESPACES, PROTOCOL_VERSION } = await import('@tabfleet/protocol');
  const redis = await startRedisServer();
  const a = await startTestServer({ redisUrl: redis.url, nodeId: 'watch-a' });
  const b = await startTestServer({ redisUrl: redis.url, nodeId: 'watch-b' });
  t.after(async () => {
    await a.stop();
    await b.stop();
    redis.stop();
  });
  const job = await a.createJob({ minWorkers: 2, maxWorkers: 2, trust: 'trusted' });
  const sims = await Promise.all([0, 1].map(() => a.volunteer()));
  for (const s of sims) await s.request(job.id);
  await waitFor('rounds with nobody watching', () => sims.every((s) => s.committed.length >= 2), 20_000);

  const dash = io(`${b.url}${NAMESPACES.dashboard}`, { auth: { protocol: PROTOCOL_VERSION, token: 'test-token' }, transports: ['websocket'] });
  const updates: unknown[] = [], tables: unknown[][] = [];
  dash.on('job:update', (j: unknown) => updates.push(j));
  dash.on('job:workers', (w: { workers: unknown[] }) => tables.push(w.workers));
  assert.equal((await dash.emitWithAck('subscribe', { jobId: job.id })).ok, true);
  await waitFor('updates and the worker table from the other node', () => updates.length >= 2 && tables.some((x) => x.length === 2), 20_000);
  dash.close();
  for (const s of sims) s.close();
});
