// Members report the path each of their WebRTC links took (`links:paths`); the server keeps each
// member's latest report: the worker table shows a member's links, the job summary and /metrics the
// links among members, each counted once. Bad reports are refused and change nothing.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { LinkPath, WorkerRow } from '@tabfleet/protocol';
import { parseSamples, sampleValue } from '../src/testing/exposition';
import { checkMetrics } from '../src/testing/promtool';
import { waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

async function linksMetric(jobId: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const checked = await checkMetrics(text);
  assert.equal(checked.code, 0, checked.output);
  assert.equal(checked.output.trim(), '', `promtool lint:\n${checked.output}`);
  const samples = parseSamples(text);
  const out: Record<string, number> = {};
  for (const path of ['host', 'srflx', 'prflx', 'relay']) out[path] = sampleValue(samples, 'tabfleet_job_links', { job_id: jobId, path });
  for (const protocol of ['udp', 'tcp', 'tls']) out[`relay_${protocol}`] = sampleValue(samples, 'tabfleet_job_relayed_links', { job_id: jobId, protocol });
  return out;
}

test('reported link paths reach the worker table, the job summary and /metrics; bad reports are refused', async () => {
  const job = await server.createJob({ minWorkers: 3, maxWorkers: 3, trust: 'trusted' });
  const sims = await Promise.all([0, 1, 2].map(() => server.volunteer()));
  for (const s of sims) s.holdRounds = true;
  for (const s of sims) await s.request(job.id);
  const [a, b, c] = sims.map((s) => s.volunteerId);
  await waitFor('all three are members', async () => (await server.api(`/api/jobs/${job.id}`)).body.workers.length === 3);

  const none = (await server.api(`/api/jobs/${job.id}`)).body;
  assert.deepEqual(none.job.links, { total: 0, direct: 0, relayed: 0, relayedShare: null, byKind: { host: 0, srflx: 0, prflx: 0, relay: 0 }, relayProtocols: { udp: 0, tcp: 0, tls: 0 } });
  assert.deepEqual(none.workers.map((w: WorkerRow) => w.links), [[], [], []]);

  // a–b through NATs (srflx at a, seen as prflx by b); b–c relayed at c over TCP; a–c host.
  const reports: Record<string, LinkPath[]> = {
    [a]: [{ peer: b, local: 'srflx', remote: 'srflx', rttMs: 21.5 }, { peer: c, local: 'host', remote: 'host', rttMs: 0.4 }],
    [b]: [{ peer: a, local: 'srflx', remote: 'prflx', rttMs: 22 }, { peer: c, local: 'srflx', remote: 'relay', rttMs: null }],
    [c]: [{ peer: b, local: 'relay', remote: 'srflx', relayProtocol: 'tcp', rttMs: 48 }, { peer: a, local: 'host', remote: 'host', rttMs: 0.5 }],
  };
  for (const s of sims) assert.deepEqual(await s.emit('links:paths', { jobId: job.id, links: reports[s.volunteerId] }), { ok: true, kept: 2 });

  const { job: summary, workers } = (await server.api(`/api/jobs/${job.id}`)).body as { job: { links: unknown }; workers: WorkerRow[] };
  assert.deepEqual(summary.links, {
    total: 3, direct: 2, relayed: 1, relayedShare: 1 / 3, byKind: { host: 1, srflx: 1, prflx: 0, relay: 1 }, relayProtocols: { udp: 0, tcp: 1, tls: 0 },
  });
  for (const w of workers) assert.deepEqual(w.links, reports[w.volunteerId], w.volunteerId);
  assert.deepEqual(await linksMetric(job.id), { host: 1, srflx: 1, prflx: 0, relay: 1, relay_udp: 0, relay_tcp: 1, relay_tls: 0 });

  // Refused, each with what was wrong, and the reports stay as they were.
  const refusals: [unknown, RegExp][] = [
    [[{ peer: b, local: 'turn', remote: 'host', rttMs: 1 }], /links\.0\.local/],
    [[{ peer: b, local: 'host', remote: 'host', relayProtocol: 'udp', rttMs: 1 }], /relayProtocol is for a relayed local candidate/],
    [[{ peer: b, local: 'host', remote: 'host', rttMs: -1 }], /links\.0\.rttMs/],
    [[{ peer: b, local: 'host', remote: 'host', rttMs: 1 }, { peer: b, local: 'relay', remote: 'host', rttMs: 1 }], /one path per peer/],
    [[{ peer: a, local: 'host', remote: 'host', rttMs: 1 }], /no link to itself/],
    [Array.from({ length: 65 }, (_, i) => ({ peer: `p${i}`, local: 'host', remote: 'host', rttMs: 1 })), /links/],
  ];
  for (const [links, why] of refusals) {
    const ack = await sims[0].emit('links:paths', { jobId: job.id, links } as never);
    assert.equal(ack.ok, false, JSON.stringify(links).slice(0, 200));
    assert.equal(!ack.ok && ack.error.code, 'bad_request');
    assert.match(!ack.ok ? ack.error.message : '', why);
  }
  const outsider = await server.volunteer();
  const notMember = await outsider.emit('links:paths', { jobId: job.id, links: [{ peer: a, local: 'relay', remote: 'relay', rttMs: 1 }] });
  assert.match(!notMember.ok ? notMember.error.message : '', new RegExp(`not in job ${job.id}`), 'a volunteer in no job is refused');
  assert.deepEqual((await server.api(`/api/jobs/${job.id}`)).body.job.links, summary.links, 'nothing changed');

  // A member's new report replaces its last; a peer that is no longer a member is not kept.
  assert.deepEqual(await sims[0].emit('links:paths', { jobId: job.id, links: [{ peer: c, local: 'host', remote: 'host', rttMs: 0.3 }, { peer: 'gone', local: 'host', remote: 'host', rttMs: 1 }] }),
    { ok: true, kept: 1 });
  // c leaves: its links go from the summary (b and a still report theirs to c, which are not counted).
  sims[2].close();
  await waitFor('c left', async () => (await server.api(`/api/jobs/${job.id}`)).body.job.workers === 2);
  const afterLeave = (await server.api(`/api/jobs/${job.id}`)).body as { job: { links: { total: number; byKind: Record<string, number> } }; workers: WorkerRow[] };
  assert.equal(afterLeave.job.links.total, 1, 'a–b only');
  assert.deepEqual(afterLeave.job.links.byKind, { host: 0, srflx: 1, prflx: 0, relay: 0 }, 'b still reports a–b');
  assert.deepEqual(afterLeave.workers.find((w) => w.volunteerId === b)!.links, [reports[b][0]]);
  assert.deepEqual((await linksMetric(job.id)).relay, 0);
});
