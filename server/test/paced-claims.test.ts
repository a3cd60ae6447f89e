// A paced member's own word about its work, through the real server with simulated volunteers (issue
// 34, item 8): a member that claimed `computeMs` 1 in its results and twice its steps in `round:ready`
// was given the most steps every sync and credited them twice over (3.9 times an honest member's
// credit at a live server; the job's step ran to 976 where about 400 steps were done). In an
// untrusted job the server now paces members by its own time and counts at most the steps it gave.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { pacedStepCeiling, type PublicContributors, type RoundBegin } from '@tabfleet/protocol';
import { waitFor, type SimVolunteer } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  // No redundant recompute: a replicated unit is trained as given (H steps), not paced.
  server = await startTestServer({ replicationRate: { probation: 0, trusted: 0 } });
});
after(() => server.stop());

/** Per committed sync, each member's steps as the server counted them (its `round:begin`). */
function countedSteps(s: SimVolunteer): Map<number, Record<string, number>> {
  return new Map(s.events.filter((e) => e.name === 'round:begin').map((e) => [(e.payload as RoundBegin).seq, (e.payload as RoundBegin).steps!]));
}

test('a paced member claiming a 1-ms compute time and the most steps accepted is credited as an honest member of its speed; the job counts no more than it gave', async (t) => {
  // Both "train" at 10 ms a step in 300-ms budgets: 30 steps fit each.
  const created = await server.createJob({ H: 4, pacing: 'paced', roundBudgetMs: 300, minWorkers: 2, maxWorkers: 2, targetSteps: 100_000, checkpointEvery: 1000 });
  assert.equal(created.spec.trust, 'untrusted');
  const honest = await server.volunteer({ clientId: 'honest-0123456789abcdef', displayName: 'Honest', msPerStep: 10 });
  const liar = await server.volunteer({
    clientId: 'liar-0123456789abcdef', displayName: 'Liar', msPerStep: 10,
    // As many steps as the server accepts of the steps it gave (before: twice them), whatever it did.
    claim: { steps: (_took, given, spec) => pacedStepCeiling(given, spec.trust), computeMs: () => 1 },
  });
  await honest.request(created.id);
  await liar.request(created.id);
  await waitFor('eight syncs', () => honest.committed.length >= 8 && liar.committed.length >= 8, 30_000);
  await server.stopJobs();
  await server.hub.flushed();
  const job = (await server.api(`/api/jobs/${created.id}`)).body.job as { seq: number; step: number };
  const { contributors } = (await (await fetch(`${server.url}/api/public/jobs/${created.id}/contributors`)).json()) as PublicContributors;
  const rounds = (await server.api(`/api/jobs/${created.id}/rounds`)).body.rounds as { outcome: string; members: string[] }[];
  const committed = rounds.filter((r) => r.outcome === 'committed');
  assert.equal(committed.length, job.seq, 'every sync was one committed group round');
  assert.ok(committed.every((r) => r.members.length === 2), 'both members took part in every sync');

  // Per sync: each member's work (given, took) and the steps the server counted for it.
  const counted = countedSteps(honest);
  const works = (s: SimVolunteer) => new Map(s.pacedWorks.map((w) => [w.seq, w]));
  const [h, l] = [works(honest), works(liar)];
  const syncs = Array.from({ length: job.seq }, (_, i) => i + 1);
  const sum = (f: (seq: number) => number) => syncs.reduce((a, seq) => a + f(seq), 0);
  const given = sum((seq) => Math.round((h.get(seq)!.given + l.get(seq)!.given) / 2));
  const done = sum((seq) => (h.get(seq)!.took + l.get(seq)!.took) / 2);
  const samples = (name: string) => contributors.find((c) => c.name === name)!.samples;
  const ratio = samples('Liar') / samples('Honest');
  t.diagnostic(`${job.seq} syncs: the liar credited ${ratio.toFixed(3)} times the honest member's samples; job step ${job.step}, given ${given}, done ${done}`);
  assert.ok(ratio <= 1.25, `the liar was credited ${ratio.toFixed(2)} times the honest member's samples`);
  assert.ok(job.step <= given, `the job counted ${job.step} steps; the server gave ${given} (the sum of each sync's mean)`);
  assert.ok(job.step <= 1.1 * done, `the job counted ${job.step} steps where ${done} were done`);
  for (const seq of syncs) {
    for (const [s, w] of [[honest, h.get(seq)!], [liar, l.get(seq)!]] as const) {
      assert.ok(counted.get(seq)![s.volunteerId] <= w.given, `sync ${seq}: ${s === liar ? 'the liar' : 'the honest member'} counted ${counted.get(seq)![s.volunteerId]} steps, given ${w.given}`);
    }
  }
  assert.equal(job.step, sum((seq) => Math.round((counted.get(seq)![honest.volunteerId] + counted.get(seq)![liar.volunteerId]) / 2)), 'the job\'s step: the sum of each sync\'s mean counted steps');
  assert.deepEqual([honest.errors, liar.errors], [[], []]);
});
