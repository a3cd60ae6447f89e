// The soak's rounds go through the collective: simulated volunteers on a real test server with the
// soak's exchanger (collective-exchanger.ts) commit syncs whose bytes crossed the in-memory network as
// a Ring allreduce (a trusted job) or a Group average (an untrusted job, the soak's); swapping the
// exchanger for an in-process mean leaves the network silent and fails these. A link cut mid-round
// fails the ring with the collective's typed `peer_lost`, which the members report with
// `round:failed`; the round re-forms and the job goes on with every member agreeing.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { checksumOf, decodeFrame, layoutOf, type FrameKindName, type JobSpecInput } from '@tabfleet/protocol';
import { startTestServer, waitFor, type SimVolunteer, type TestServer } from '@tabfleet/server/testing';
import { CollectiveExchanger } from './collective-exchanger';

let server: TestServer;
after(() => server?.stop());

const JOB: Partial<JobSpecInput> = { preset: 'mlp-fashion', H: 1, targetSteps: 1_000_000, evalEverySteps: 1_000_000 };

async function start(n: number, spec: Partial<JobSpecInput>) {
  server ??= await startTestServer();
  const exchanger = new CollectiveExchanger({ seed: 7 });
  const job = await server.createJob({ ...JOB, ...spec, minWorkers: n, maxWorkers: n });
  const sims: SimVolunteer[] = [];
  for (let i = 0; i < n; i++) sims.push(await server.volunteer({ exchanger, trainMs: 2 }));
  for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
  const inSync = (seq: number) => waitFor(`every volunteer at sync ${seq}\n${server.logTail(10)}`, () => sims.every((s) => s.committed.includes(seq)), 20_000);
  const commits: { id: string; roundId: number }[] = [];
  for (const s of sims) s.socket.on('round:commit', (c: { roundId: number }) => commits.push({ id: s.volunteerId, roundId: c.roundId }));
  /** Bytes of frames of these kinds written to the network from now on. */
  const bytesOf = (kinds: FrameKindName[]) => {
    const seen = { bytes: 0 };
    exchanger.net.tap((_from, _to, frame) => {
      if (kinds.includes(decodeFrame(frame).kind)) seen.bytes += frame.byteLength;
    });
    return seen;
  };
  return { exchanger, job, sims, inSync, commits, bytesOf };
}

/** Three syncs from the one every member holds now; what crossed the network meanwhile (the first may have begun before). */
async function threeSyncs(t: Awaited<ReturnType<typeof start>>, kinds: FrameKindName[]) {
  await t.inSync(1);
  const seen = t.bytesOf(kinds);
  const from = Math.max(...t.sims.map((s) => s.committed.at(-1)!));
  await t.inSync(from + 3);
  return { bytes: seen.bytes, last: from + 3 };
}

function checkCommits(t: Awaited<ReturnType<typeof start>>, last: number) {
  assert.ok(t.commits.length >= 3 * t.sims.length && t.commits.every((c) => t.exchanger.completed(c.id, c.roundId)), 'every commit came from a completed collective op');
  assert.equal(new Set(t.sims.map((s) => checksumOf(s.applied.get(last)!))).size, 1, 'every member holds the same bytes');
  assert.deepEqual(t.exchanger.counters.failures, {});
  assert.equal(t.exchanger.counters.wire.duplicate, 0);
  for (const s of t.sims) assert.deepEqual(s.errors, []);
}

test('a trusted job\'s round: the mean travels the in-memory network as a Ring allreduce', async () => {
  const t = await start(3, { trust: 'trusted' });
  const S = layoutOf(t.job.spec).length * 4;
  const { bytes, last } = await threeSyncs(t, ['allreduce']);
  // Each member sends 2(N−1)/N of the vector per round, so the ring ≥ 2(N−1)·S per sync (two whole syncs at least).
  assert.ok(bytes >= 2 * 2 * (3 - 1) * S, `${bytes} bytes of allreduce frames for 3 syncs of ${S} bytes`);
  checkCommits(t, last);
  await server.stopJobs();
});

test('an untrusted job\'s round (the soak\'s): a Group average by per-part owners, digests reported', async () => {
  const t = await start(3, {});
  const S = layoutOf(t.job.spec).length * 4;
  const { bytes, last } = await threeSyncs(t, ['groupScatter', 'groupGather']);
  // Each member sends its N−1 other parts to their owners and its own part's aggregate to N−1 members.
  assert.ok(bytes >= 2 * 2 * (3 - 1) * S, `${bytes} bytes of group frames for 3 syncs of ${S} bytes`);
  checkCommits(t, last);
  const rounds = (await server.api(`/api/jobs/${t.job.id}/rounds`)).body.rounds as { mode: string; outcome: string }[];
  assert.ok(rounds.filter((r) => r.outcome === 'committed').every((r) => r.mode === 'group'), JSON.stringify(rounds));
  await server.stopJobs();
});

test('a link cut mid-round: the ring fails with peer_lost, the members report it, the round re-forms and commits', async () => {
  const { exchanger, job, sims, inSync } = await start(4, { trust: 'trusted' });
  await inSync(2);
  const ids = sims.map((s) => s.volunteerId);
  // The link is stalled at an allreduce frame, then dropped once both its ends have begun that round:
  // a stalled link holds every ring member inside its op, so the drop always lands mid-round. (Dropping
  // at a frame straight away could land after a member's op had ended; CI once saw no peer_lost then.)
  let stalled: { from: string; to: string; round: number } | null = null;
  exchanger.net.tap((from, to, frame) => {
    const f = decodeFrame(frame);
    if (stalled || f.kind !== 'allreduce' || !ids.includes(from)) return;
    stalled = { from, to, round: f.round };
    exchanger.net.stall(from, to);
  });
  const link = await waitFor('a stalled link', () => stalled, 10_000);
  await waitFor(`both ends of ${link.from}→${link.to} in round ${link.round}`, () => exchanger.began(job.id, link.round, [link.from, link.to]), 10_000);
  exchanger.net.dropLink(link.from, link.to);
  exchanger.net.setFaults(link.from, link.to, {});
  const seq = Math.max(...sims.map((s) => s.committed.at(-1)!)) + 2;
  await inSync(seq);
  assert.ok((exchanger.counters.failures.peer_lost ?? 0) >= 2, `failures: ${JSON.stringify(exchanger.counters.failureSamples)}\n${server.logTail(30)}`);
  const rounds = (await server.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { outcome: string; detail: string }[];
  const aborted = rounds.filter((r) => r.outcome === 'aborted');
  assert.ok(aborted.some((r) => /peer_lost/.test(r.detail)), `aborted rounds: ${JSON.stringify(aborted)}`);
  assert.equal(new Set(sims.map((s) => checksumOf(s.applied.get(seq)!))).size, 1);
  for (const s of sims) assert.deepEqual(s.errors, []);
  await server.stopJobs();
});
