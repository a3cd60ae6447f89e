// Reputation by identity (the client id a browser keeps), through the real server and its store: what
// validators confirmed follows a volunteer into its next job and shows in the worker table; an
// identity on probation has its parts checked first, so a new liar among trusted members is caught in
// its first rounds; faults are kept in the store too.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PROBATION_VERIFIED, type RoundBegin, type WorkerRow } from '@tabfleet/protocol';
import { waitFor, type SimOptions, type SimVolunteer } from '../src/testing/sim-volunteer';
import { endReason, testServerPerFile } from './group-jobs';

const testServer = testServerPerFile();

async function job(members: { clientId: string; opts?: Partial<SimOptions> }[]) {
  const created = await testServer().createJob({ minWorkers: members.length, maxWorkers: members.length, H: 1, targetSteps: 1000 });
  const sims: SimVolunteer[] = [];
  for (const m of members) sims.push(await testServer().volunteer({ clientId: m.clientId, ...m.opts }));
  for (const s of sims) await s.request(created.id);
  return { id: created.id, sims };
}
// Client ids as a browser makes them (16 to 64 characters).
const [ANN, BEN, CAL, DAN, T1, T2, T3, NEWCOMER] = ['ann', 'ben', 'cal', 'dan', 'trusted-1', 'trusted-2', 'trusted-3', 'newcomer'].map((n) => `reputation-${n}-0123456789`);
const workersOf = async (id: string): Promise<WorkerRow[]> => (await testServer().api(`/api/jobs/${id}`)).body.workers;

test('what validators confirmed follows an identity into its next job, in the worker table and the store', async () => {
  const first = await job([{ clientId: ANN }, { clientId: BEN }, { clientId: CAL }]);
  await waitFor('ann verified twice', async () => ((await workersOf(first.id)).find((w) => w.volunteerId === first.sims[0].volunteerId)?.reputation?.verified ?? 0) >= 2, 30_000);
  await testServer().api(`/api/jobs/${first.id}/stop`, { method: 'POST' });
  await waitFor('written', async () => ((await testServer().store.reputations([ANN])).get(ANN)?.verified ?? 0) >= 2);
  const stored = (await testServer().store.reputations([ANN])).get(ANN)!;

  const second = await job([{ clientId: ANN }, { clientId: DAN }]);
  const rows = await waitFor('both in the table', async () => {
    const w = await workersOf(second.id);
    return w.length === 2 ? w : null;
  });
  const ann = rows.find((w) => w.volunteerId === second.sims[0].volunteerId)!;
  assert.ok(ann.reputation && ann.reputation.verified >= stored.verified, JSON.stringify(ann.reputation));
  assert.equal(ann.reputation.faults, 0);
  const dan = rows.find((w) => w.volunteerId === second.sims[1].volunteerId)!;
  assert.ok(dan.reputation && dan.reputation.probation && dan.reputation.verified <= 2, JSON.stringify(dan.reputation));
});

test('a newcomer on probation has its part checked first: a lying owner among trusted members is caught in its first round', async () => {
  for (const id of [T1, T2, T3]) await testServer().store.addReputation(id, { verified: PROBATION_VERIFIED + 5 });
  const { id, sims } = await job([{ clientId: T1 }, { clientId: T2 }, { clientId: T3 }, { clientId: NEWCOMER, opts: { ownerLie: (a) => a.map((v) => v + 1) } }]);
  const liar = sims[3];
  await waitFor('the newcomer is removed', () => endReason(liar), 30_000);
  assert.match(endReason(liar)!, /owner sent a wrong aggregate/);
  const rounds = ((await testServer().api(`/api/jobs/${id}/rounds`)).body.rounds as { members: string[]; outcome: string }[]).filter((r) => r.members.includes(liar.volunteerId));
  assert.equal(rounds.length, 1, `caught in its first round: ${JSON.stringify(rounds)}`);
  assert.equal(rounds[0].outcome, 'aborted');
  // Its part was drawn: the uniform draw's one check of a group of four, or the probationer's check on top of it.
  const validate = sims[0].events.find((e) => e.name === 'round:validate')!.payload as { roundId: number; checks: { part: number }[] };
  const begin = sims[0].events.find((e) => e.name === 'round:begin' && (e.payload as RoundBegin).roundId === validate.roundId)!.payload as RoundBegin;
  assert.ok(validate.checks.map((c) => begin.members[c.part]).includes(liar.volunteerId), JSON.stringify(validate.checks));
  assert.ok(validate.checks.length <= 2, JSON.stringify(validate.checks));
  await waitFor('the fault is stored', async () => (await testServer().store.reputations([NEWCOMER])).get(NEWCOMER)?.faults === 1);
  assert.match((await testServer().store.reputations([NEWCOMER])).get(NEWCOMER)!.lastFault!, /wrong aggregate/);
  for (const s of sims.slice(0, 3)) assert.equal(endReason(s), undefined);
});
