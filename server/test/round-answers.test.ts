// A round is settled as soon as every member answered, results or failures, and an `unreachable`
// claim is checked against what the others saw before a sync goes through the server. (Before: a
// failure that arrived before the others' results left the round to its whole deadline, and one
// claim per sync forced every sync into a star round, 17 of 17.)
import assert from 'node:assert/strict';
import { after, afterEach, before, test } from 'node:test';
import type { RoundBegin } from '@tabfleet/protocol';
import { waitFor, type SimVolunteer } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

const ROUND_TIMEOUT_MS = 30_000;
let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: ROUND_TIMEOUT_MS, barrierTimeoutMs: 10_000, loadTimeoutMs: 10_000 } });
});
after(() => server.stop());
afterEach(() => server.stopJobs());

type Round = { roundId: number; seq: number; mode: string; outcome: string; detail: string; members: string[]; startedAt: number; endedAt: number | null };
const roundsOf = async (id: string): Promise<Round[]> => (await server.api(`/api/jobs/${id}/rounds`)).body.rounds;
const endReason = (s: SimVolunteer) => (s.events.find((e) => e.name === 'job:end')?.payload as { reason: string } | undefined)?.reason;

/** Three members of a trusted ring job; `sims[0]` takes part in the first ring round's exchange, then reports `code` instead of a result. */
async function firstRoundAnsweredWith(code: 'peer_lost' | 'unreachable') {
  const job = await server.createJob({ minWorkers: 3, maxWorkers: 3, trust: 'trusted' });
  const sims = await Promise.all([0, 1, 2].map(() => server.volunteer()));
  sims[0].holdRounds = true;
  for (const s of sims) await s.request(job.id);
  const begin = await waitFor('the first round', () => sims[0].events.map((e) => e.payload as RoundBegin).find((p) => p?.mode === 'ring'));
  // Its contribution goes in, so the others finish; then it says it could not.
  void server.oracle.contribute(job.id, begin.roundId, begin.members, sims[0].volunteerId, sims[0].params.slice());
  sims[0].holdRounds = false; // the rounds after this one it takes part in
  const ack = await sims[0].emit('round:failed', { jobId: job.id, roundId: begin.roundId, code, message: 'attacker' });
  assert.equal(ack.ok, true);
  return { job, sims, begin };
}

test('a failure that arrives before the others\' results: the round is re-formed once all answered, not at the deadline', async () => {
  const { job, begin } = await firstRoundAnsweredWith('peer_lost');
  const first = await waitFor('the first round ends', async () => (await roundsOf(job.id)).find((r) => r.roundId === begin.roundId && r.outcome !== 'running'));
  assert.equal(first.outcome, 'aborted');
  assert.match(first.detail, /failed: .* peer_lost/);
  // The old code waited out the whole deadline (30 s here) before re-forming.
  assert.ok(first.endedAt! - first.startedAt < ROUND_TIMEOUT_MS / 3, `settled ${first.endedAt! - first.startedAt} ms after it began`);
  await waitFor('a later sync commits', async () => (await roundsOf(job.id)).some((r) => r.outcome === 'committed'));
});

test('an unreachable claim while every other member finished the exchange is refuted: the claimant is removed and no star round follows', async () => {
  const { job, sims, begin } = await firstRoundAnsweredWith('unreachable');
  await waitFor('the claimant is removed', () => endReason(sims[0]));
  assert.match(endReason(sims[0])!, /claimed it could not reach its peers, but every other member finished the exchange with it/);
  // A third member again (the job needs three), so syncs go on.
  await (await server.volunteer()).request(job.id);
  await waitFor('the next sync commits', async () => (await roundsOf(job.id)).some((r) => r.outcome === 'committed'));
  const rounds = await roundsOf(job.id);
  assert.ok(rounds.filter((r) => r.roundId > begin.roundId).every((r) => r.mode === 'ring'), `no star round: ${JSON.stringify(rounds.map((r) => [r.roundId, r.mode, r.outcome]))}`);
  assert.ok(server.metrics.get('unreachable_claims_refuted') >= 1);
});
