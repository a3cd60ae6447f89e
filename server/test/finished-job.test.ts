// A job that has ended still says what it reached and who trained it: the job list carries the last
// reported test accuracy, and the worker table (HTTP and the dashboard's subscribe) lists every
// contributor as `left`, also after a server restart.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { NAMESPACES, PROTOCOL_VERSION, type Ack, type JobSummary, type WorkerRow } from '@tabfleet/protocol';
import { io } from 'socket.io-client';
import { simEvaluation, waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

const servers: TestServer[] = [];
after(async () => {
  for (const s of servers) await s.stop();
});

test('a finished job lists its departed contributors and its latest accuracy, before and after a restart', async () => {
  const server = await startTestServer();
  servers.push(server);
  const job = await server.createJob({ H: 2, minWorkers: 2, maxWorkers: 3, targetSteps: 40, checkpointEvery: 1, evalEverySteps: 2 });
  // 50 ms of "training" a sync: the job takes about a second, time enough to leave and join mid-job.
  const early = await server.volunteer({ clientId: 'early-0123456789abcdef', displayName: 'Early Bird', trainMs: 50 });
  const a = await server.volunteer({ clientId: 'a-browser-0123456789abcdef', trainMs: 50 });
  const b = await server.volunteer({ trainMs: 50 });
  await early.request(job.id);
  await a.request(job.id);
  await waitFor('a first sync', () => a.committed.length >= 1);
  await b.request(job.id);
  await waitFor('a sync with the newcomer', () => b.committed.length >= 1);
  early.close(); // leaves mid-job; the other two go on
  const before = b.committed.length;
  await waitFor('a sync without the one that left', () => b.committed.length > before);
  // Every sync is evaluated here (by several members): the list shows the latest.
  const running = (await server.api('/api/jobs')).body.jobs.find((j: JobSummary) => j.id === job.id);
  assert.ok([1, 2, 3].some((back) => running.latestAccuracy === simEvaluation(running.seq - back + 1).accuracy), `${running.latestAccuracy} at sync ${running.seq}`);
  const live = (await server.api(`/api/jobs/${job.id}`)).body.workers as WorkerRow[];
  assert.deepEqual(live.map((w) => w.state === 'left'), [false, false, true], 'two members, then the one that left');
  assert.equal(live[2].contributor, 'Early Bird');

  await waitFor('the job finishes', async () => (await server.api(`/api/jobs/${job.id}`)).body.job.state === 'done', 20_000, 50);
  await server.hub.flushed();
  const check = async (s: TestServer) => {
    const { job: done, workers } = (await s.api(`/api/jobs/${job.id}`)).body as { job: JobSummary; workers: WorkerRow[] };
    assert.equal(done.state, 'done');
    // The final sync is evaluated before its checkpoint ends the job.
    const finalAccuracy = simEvaluation(done.seq).accuracy;
    assert.equal(done.latestAccuracy, finalAccuracy);
    assert.equal((await s.api('/api/jobs')).body.jobs.find((j: JobSummary) => j.id === job.id).latestAccuracy, finalAccuracy);
    assert.equal(workers.length, 3, JSON.stringify(workers));
    assert.ok(workers.every((w) => w.state === 'left' && w.jobId === job.id));
    const rounds = (await s.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { outcome: string; members: string[] }[];
    for (const sim of [early, a, b]) {
      const row = workers.find((w) => w.volunteerId === sim.volunteerId)!;
      assert.ok(row, `a row for ${sim.volunteerId}`);
      assert.equal(row.adapter, 'sim test simulated');
      assert.equal(row.syncs, rounds.filter((r) => r.outcome === 'committed' && r.members.includes(sim.volunteerId)).length);
      assert.ok(row.syncs > 0);
    }
    // The dashboard's subscribe answers with the same rows.
    const dash = io(`${s.url}${NAMESPACES.dashboard}`, { auth: { protocol: PROTOCOL_VERSION, token: 'test-token' }, transports: ['websocket'] });
    const ack = (await dash.timeout(5_000).emitWithAck('subscribe', { jobId: job.id })) as Ack<{ workers: WorkerRow[]; job: JobSummary }>;
    dash.close();
    assert.ok(ack.ok);
    assert.deepEqual(ack.workers, workers);
    assert.equal(ack.job.latestAccuracy, finalAccuracy);
  };
  await check(server);

  // The same answers from a new server process over the same data directory.
  for (const v of [a, b]) v.close();
  await server.close();
  const restarted = await startTestServer({ dataDir: server.dataDir });
  servers.push(restarted);
  await check(restarted);
});

test('a job stopped while volunteers train lists them as left', async () => {
  const server = await startTestServer();
  servers.push(server);
  const job = await server.createJob({ minWorkers: 2, maxWorkers: 2 });
  const sims = [await server.volunteer(), await server.volunteer()];
  for (const s of sims) await s.request(job.id);
  await waitFor('a sync', () => sims[0].committed.length >= 1);
  assert.equal((await server.api(`/api/jobs/${job.id}/stop`, { method: 'POST' })).status, 200);
  const { workers } = (await server.api(`/api/jobs/${job.id}`)).body as { workers: WorkerRow[] };
  assert.deepEqual(workers.map((w) => w.state).sort(), ['left', 'left']);
  assert.deepEqual(workers.map((w) => w.volunteerId).sort(), sims.map((s) => s.volunteerId).sort());
  assert.equal((await server.api(`/api/jobs/${job.id}`)).body.job.latestAccuracy, null, 'never evaluated');
});
