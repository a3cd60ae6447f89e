// A member lost mid-round: the round is aborted and re-formed at once with the survivors, who keep
// their local progress (no step lost, nothing applied twice).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { RoundBegin } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

test('losing a member mid-round aborts it and re-forms the round with the survivors', async () => {
  const job = await server.createJob({ minWorkers: 2, maxWorkers: 3 });
  const sims = await Promise.all([0, 1, 2].map(() => server.volunteer()));
  for (const s of sims) s.holdRounds = true;
  for (const s of sims) await s.request(job.id);
  const first = await waitFor('round:begin', () => sims[0].events.find((e) => e.name === 'round:begin')?.payload as RoundBegin | undefined);
  assert.equal(first.members.length, 3);
  const [lost, ...survivors] = sims;
  const stepsBefore = survivors.map((s) => s.step);
  const paramsBefore = survivors.map((s) => s.params.slice());
  lost.close();

  for (const s of survivors) {
    const abort = await waitFor('round:abort', () => s.events.find((e) => e.name === 'round:abort')?.payload as { roundId: number; lost: string[] } | undefined);
    assert.equal(abort.roundId, first.roundId);
    assert.deepEqual(abort.lost, [lost.volunteerId]);
  }
  const reformed = await waitFor('re-formed round', () => survivors[0].events.map((e) => e.payload as RoundBegin).find((p) => p?.roundId > first.roundId && p.members));
  assert.equal(reformed.seq, first.seq, 'the same sync is re-run');
  assert.deepEqual([...reformed.members].sort(), survivors.map((s) => s.volunteerId).sort());
  // Nothing was applied by the aborted round and no local step was lost.
  survivors.forEach((s, i) => {
    assert.equal(s.step, stepsBefore[i]);
    assert.deepEqual(s.params, paramsBefore[i]);
  });

  for (const s of survivors) {
    s.holdRounds = false;
    s.releaseRound();
  }
  await waitFor('the re-formed round commits', () => survivors.every((s) => s.committed.includes(first.seq)));
  const expected = paramsBefore[0].map((x, i) => (x + paramsBefore[1][i]) / 2);
  for (const s of survivors) assert.ok(s.applied.get(first.seq)!.every((x, i) => Math.abs(x - expected[i]) < 1e-6), 'the mean of the survivors only');
  const rounds = (await server.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { roundId: number; outcome: string; detail: string }[];
  const aborted = rounds.find((r) => r.roundId === first.roundId)!;
  assert.equal(aborted.outcome, 'aborted');
  assert.match(aborted.detail, /lost/);
  assert.equal(rounds.find((r) => r.roundId === reformed.roundId)?.outcome, 'committed');
});

test('a member that misses the round deadline is evicted and the others go on', async () => {
  // The server's deadline runs on a fake clock, moved past it once the honest members have given up
  // on the silent one (their exchange does so on the real clock, 100 ms before the deadline) and said
  // so: however slowly a loaded machine runs them, they cannot miss it. On the real clock (a 1.5 s
  // deadline) a fresh clone's suite beside a CPU-bound process failed here.
  const clock = new FakeClock(Date.now());
  const roundTimeoutMs = 1_500;
  const fast = await startTestServer({ clock, timing: { roundTimeoutMs, barrierTimeoutMs: 5_000, loadTimeoutMs: 5_000 } });
  try {
    const job = await fast.createJob({ minWorkers: 2, maxWorkers: 3 });
    const sims = await Promise.all([0, 1, 2].map(() => fast.volunteer()));
    sims[2].holdRounds = true; // never answers
    for (const s of sims) await s.request(job.id);
    const first = await waitFor('the round of all three begins', () => sims[2].events.find((e) => e.name === 'round:begin')?.payload as RoundBegin | undefined);
    await waitFor('the honest two report the failed exchange', () => sims.slice(0, 2).every((s) => s.failedRounds.includes(first.roundId)));
    assert.equal(sims[2].ended, null, 'nobody is evicted before the deadline');
    await clock.advance(roundTimeoutMs);
    await waitFor('eviction', () => sims[2].ended);
    assert.match(sims[2].ended!, /deadline/);
    await waitFor('the others commit without it', () => sims[0].committed.length >= 2 && sims[1].committed.length >= 2);
    assert.equal(sims[0].ended, null);
    assert.equal(sims[1].ended, null);
  } finally {
    await fast.stop();
  }
});
