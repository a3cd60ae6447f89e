// Dashboards subscribed over Socket.IO get job updates, metric points and the worker table live.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { NAMESPACES, PROTOCOL_VERSION, type JobSummary, type MetricPoint, type WorkerRow } from '@tabfleet/protocol';
import { io } from 'socket.io-client';
import { waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

test('a subscribed dashboard sees the job run live', async () => {
  const job = await server.createJob({ minWorkers: 2, maxWorkers: 2 });
  const dash = io(`${server.url}${NAMESPACES.dashboard}`, { auth: { protocol: PROTOCOL_VERSION, token: 'test-token' }, transports: ['websocket'] });
  const updates: JobSummary[] = [], points: MetricPoint[] = [], tables: WorkerRow[][] = [];
  dash.on('job:update', (j: JobSummary) => updates.push(j));
  dash.on('job:metrics', (m: { points: MetricPoint[] }) => points.push(...m.points));
  dash.on('job:workers', (w: { workers: WorkerRow[] }) => tables.push(w.workers));
  const sub = await dash.emitWithAck('subscribe', { jobId: job.id });
  assert.equal(sub.ok, true);
  assert.equal(sub.job.state, 'waiting');
  assert.deepEqual(sub.workers, []);

  const sims = await Promise.all([0, 1].map(() => server.volunteer()));
  for (const s of sims) await s.request(job.id);
  await waitFor('live updates', () => updates.some((u) => u.seq >= 3) && points.length >= 3 && tables.some((t) => t.length === 2));
  assert.ok(updates.every((u) => u.id === job.id));
  assert.equal(updates.at(-1)!.state, 'running');
  assert.ok(points.every((p, i) => i === 0 || p.seq >= points[i - 1].seq));
  assert.ok(tables.at(-1)!.every((w) => w.backend === 'webgpu' && w.jobId === job.id));
  dash.close();
});
