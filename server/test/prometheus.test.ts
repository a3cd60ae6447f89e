// /metrics as an operator's Prometheus reads it: promtool (Debian `prometheus`) accepts a live
// server's text, per-job series and all, and those series count what the job's API records.
import assert from 'node:assert/strict';
import { closeSync, openSync } from 'node:fs';
import { after, before, test } from 'node:test';
import type { MetricPoint } from '@tabfleet/protocol';
import { parseSamples, sampleValue, type Sample } from '../src/testing/exposition';
import { checkMetrics } from '../src/testing/promtool';
import { waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  // A deadline short enough that a silent member is evicted soon, long enough for honest ones on a
  // machine busy with other work (at 1.5 s a fresh clone's suite beside a CPU hog timed out here).
  server = await startTestServer({ timing: { roundTimeoutMs: 5_000, barrierTimeoutMs: 10_000, loadTimeoutMs: 10_000 } });
});
after(() => server.stop());

async function scrape(): Promise<{ text: string; samples: Sample[] }> {
  const res = await fetch(`${server.url}/metrics`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  return { text, samples: parseSamples(text) };
}

test('promtool accepts a live /metrics with per-job series, which count what the rounds and metrics APIs record', async () => {
  const job = await server.createJob({ minWorkers: 2, maxWorkers: 3 });
  const sims = await Promise.all([0, 1, 2].map(() => server.volunteer()));
  sims[2].holdRounds = true; // never answers: its round is aborted at the deadline and it is evicted
  for (const s of sims) await s.request(job.id);
  await waitFor('the silent member is evicted', () => sims[2].ended, 60_000);
  await waitFor('three syncs committed without it', () => {
    const evicted = sims.slice(0, 2).find((s) => s.ended);
    if (evicted) throw new Error(`an honest member's job ended before three syncs: ${evicted.ended}`);
    return sims[0].committed.length >= 3 && sims[1].committed.length >= 3;
  }, 60_000);
  // The survivors fall silent too: their round is aborted, they are evicted, and the job waits with
  // no members, so nothing it counts moves while it is compared with what its API records.
  for (const s of sims.slice(0, 2)) s.holdRounds = true;
  await waitFor('the survivors are evicted', () => sims[0].ended && sims[1].ended, 60_000);

  const { text, samples } = await scrape();
  const checked = await checkMetrics(text);
  assert.equal(checked.code, 0, `promtool check metrics failed:\n${checked.output}`);
  assert.equal(checked.output.trim(), '', `promtool check metrics has lint problems:\n${checked.output}`);
  assert.match(text, /^# HELP tabfleet_job_rounds_total .+$/m);
  // Runtime metrics as every Node service exports them.
  assert.ok(sampleValue(samples, 'process_resident_memory_bytes') > 0);
  assert.ok(sampleValue(samples, 'nodejs_heap_size_used_bytes') > 0);

  const perJob = (name: string, labels: Record<string, string> = {}) => sampleValue(samples, name, { job_id: job.id, ...labels });
  const committedSeen = perJob('tabfleet_job_rounds_total', { outcome: 'committed' });
  const abortedSeen = perJob('tabfleet_job_rounds_total', { outcome: 'aborted' });
  // The store is written behind the coordinator: wait until the API has every round /metrics counted.
  const rounds = await waitFor('the rounds API has every round', async () => {
    const list = (await server.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { outcome: string }[];
    const count = (outcome: string) => list.filter((r) => r.outcome === outcome).length;
    return count('running') === 0 && count('committed') === committedSeen && count('aborted') === abortedSeen ? list : null;
  });
  assert.ok(committedSeen >= 3, `${committedSeen} committed`);
  // Both aborts were deadlines (the silent member's round, then the survivors'); nobody was lost or lied.
  assert.ok(abortedSeen >= 2, `${abortedSeen} aborted`);
  assert.equal(perJob('tabfleet_job_round_aborts_total', { reason: 'deadline' }), abortedSeen);
  for (const reason of ['member_lost', 'member_failed', 'rejected', 'groups_failed', 'job_ended', 'server_restarted']) {
    assert.equal(perJob('tabfleet_job_round_aborts_total', { reason }), 0, reason);
  }
  assert.equal(rounds.length, committedSeen + abortedSeen);
  assert.equal(perJob('tabfleet_job_evictions_total', { fault: 'liveness' }), 3);
  assert.equal(perJob('tabfleet_job_evictions_total', { fault: 'integrity' }), 0);
  assert.equal(sampleValue(samples, 'tabfleet_members_evicted_total'), 3);
  assert.equal(perJob('tabfleet_job_workers'), 0);

  // The bytes the committed syncs' members reported are the sum of the job's metric points' bytesSent.
  const points = (await server.api(`/api/jobs/${job.id}/metrics`)).body.points as MetricPoint[];
  const sent = points.reduce((sum, p) => sum + (p.bytesSent ?? 0), 0);
  assert.ok(sent > 0);
  assert.equal(perJob('tabfleet_job_exchange_bytes_total', { direction: 'sent' }), sent);
  assert.ok(perJob('tabfleet_job_exchange_bytes_total', { direction: 'received' }) > 0);
  const { job: detail } = (await server.api(`/api/jobs/${job.id}`)).body;
  const checkpointBytes = perJob('tabfleet_job_checkpoint_bytes_total');
  if (detail.latestCheckpoint) assert.ok(checkpointBytes >= detail.latestCheckpoint.bytes, `${checkpointBytes} bytes counted, the latest checkpoint alone has ${detail.latestCheckpoint.bytes}`);
  else assert.equal(checkpointBytes, 0);

  // Once the job ends, its series are gone: per-job labels only for jobs that run.
  assert.equal((await server.api(`/api/jobs/${job.id}/stop`, { method: 'POST' })).status, 200);
  const afterEnd = await scrape();
  assert.deepEqual(afterEnd.samples.filter((s) => s.labels.job_id === job.id), []);
  await waitFor('the store counts the job stopped', async () => sampleValue((await scrape()).samples, 'tabfleet_jobs', { state: 'stopped' }) === 1);
  const recheck = await checkMetrics(afterEnd.text);
  assert.equal(recheck.code, 0, recheck.output);
});

test('process_open_fds counts the descriptors the process opens, and no gauge lists every handle at a scrape', async () => {
  const before = sampleValue((await scrape()).samples, 'process_open_fds');
  const opened = Array.from({ length: 200 }, () => openSync('/dev/null', 'r'));
  try {
    const { samples, text } = await scrape();
    // Other work of the process may open or close a few meanwhile.
    const grew = sampleValue(samples, 'process_open_fds') - before;
    assert.ok(grew >= 195 && grew <= 205, `${grew} more descriptors counted after opening 200`);
    assert.doesNotMatch(text, /^nodejs_active_handles\{/m, 'the handles gauge (every handle object listed on the event loop) is gone');
    assert.ok(sampleValue(samples, 'nodejs_active_resources', { type: 'TCPServerWrap' }) >= 1, 'resources by type stand in for it');
  } finally {
    for (const fd of opened) closeSync(fd);
  }
});
