// Untrusted jobs average in groups (robust rules per part, digests cross-checked by the server),
// through the real server with simulated volunteers whose group rounds follow collective's group
// averaging. Each attack is one that a plain ring mean lets through.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { GroupReport, RoundBegin } from '@tabfleet/protocol';
import { waitFor } from '../src/testing/sim-volunteer';
import { endReason, groupJobs, sameParameters, testServerPerFile } from './group-jobs';

const testServer = testServerPerFile();

const { roundsOf, jobWith } = groupJobs(testServer);

test('an untrusted job averages in group rounds and a trusted one in ring rounds; members agree after every sync', async () => {
  const untrusted = await jobWith({}, 3);
  await waitFor('three syncs', () => untrusted.honest[0].committed.length >= 3);
  const rounds = await roundsOf(untrusted.id);
  assert.ok(rounds.filter((r) => r.outcome === 'committed').every((r) => r.mode === 'group'), JSON.stringify(rounds));
  for (const seq of [1, 2, 3]) assert.ok(sameParameters([...untrusted.honest, untrusted.attacker], seq), `sync ${seq}`);
  assert.equal((await testServer().api(`/api/jobs/${untrusted.id}`)).body.job.spec.aggregation, 'centered-clip');
  await testServer().api(`/api/jobs/${untrusted.id}/stop`, { method: 'POST' });

  const trusted = await jobWith({}, 1, { trust: 'trusted' });
  await waitFor('two syncs', () => trusted.honest[0].committed.length >= 2);
  assert.ok((await roundsOf(trusted.id)).filter((r) => r.outcome === 'committed').every((r) => r.mode === 'ring'));
});

for (const [attack, contribution] of [
  ['scales its update by 1e6', (p: Float32Array) => p.map((v) => v * 1e6)],
  ['sends NaN', (p: Float32Array) => p.map(() => NaN)],
  ['sends Infinity', (p: Float32Array) => p.map((v, i) => (i % 1000 === 0 ? Infinity : v))],
] as const) {
  test(`a member that ${attack}: every owner refuses it, the sync holds the honest members' values, and it is removed`, async () => {
    const { id, honest, attacker } = await jobWith({ contribution }, 3);
    await waitFor('the attacker is removed', () => endReason(attacker));
    assert.match(endReason(attacker)!, /refused by most owners/);
    await waitFor('two more syncs', () => honest[0].committed.length >= 3);
    for (const seq of honest[0].committed) {
      const p = honest[0].applied.get(seq)!;
      assert.ok(p.every((v) => Number.isFinite(v) && Math.abs(v) < 10), `sync ${seq}: a parameter left the honest range`);
      assert.ok(sameParameters(honest, seq), `sync ${seq}`);
    }
    const rounds = await roundsOf(id);
    assert.ok(rounds.some((r) => r.outcome === 'committed' && r.members.includes(attacker.volunteerId)), 'the round it spoiled committed without its values');
  });
}

const lie = (change: (d: GroupReport['digests']) => Partial<GroupReport['digests']>) => (h: GroupReport): GroupReport => ({ ...h, digests: { ...h.digests, ...change(h.digests) } });
const WRONG = 'f'.repeat(32);

for (const [who, groupReport] of [
  ['an owner that reports an aggregate other than the one it sent', lie(() => ({ aggregate: WRONG }))],
  ['a sender that reports other parts than it sent', lie((d) => ({ sent: d.sent.map(() => WRONG) }))],
  ['a member that reports other aggregates than it received', lie((d) => ({ gathered: d.gathered.map(() => WRONG) }))],
] as const) {
  test(`${who} is named by the digests: the round is aborted, nothing applied, it alone is removed, and the sync re-runs without it`, async () => {
    const { id, honest, attacker } = await jobWith({ groupReport }, 3);
    await waitFor('the liar is removed', () => endReason(attacker));
    assert.match(endReason(attacker)!, /disagrees with its group/);
    await waitFor('two syncs', () => honest[0].committed.length >= 2);
    assert.ok(honest.every((s) => !endReason(s)), 'no honest member is removed');
    const rounds = await roundsOf(id);
    const aborted = rounds.find((r) => r.outcome === 'aborted' && /digests disagree/.test(r.detail));
    assert.ok(aborted, JSON.stringify(rounds));
    assert.equal(attacker.committed.length, 0, 'the liar applied nothing');
    const rerun = rounds.find((r) => r.outcome === 'committed' && r.seq === aborted.seq);
    assert.ok(rerun && !rerun.members.includes(attacker.volunteerId));
    assert.ok(sameParameters(honest, aborted.seq));
  });
}

test('one disagreeing pair is settled by the server\'s recomputation: the liar alone is removed, and the job goes on', async () => {
  // The liar contradicts only the owner of part 0 (a single pair). Counting pairs could not tell them
  // apart and removed both; the recomputed part is the owner's aggregate, and the liar ended the round
  // with the same model as everyone else, so its receipt is the lie (digest-disputes.ts).
  const { honest, attacker } = await jobWith({ groupReport: lie((d) => ({ gathered: d.gathered.map((x, j) => (j === 0 ? WRONG : x)) })) }, 3);
  await waitFor('the liar is removed', () => endReason(attacker));
  assert.match(endReason(attacker)!, /disagrees with its group/);
  const before = honest[0].committed.length;
  await waitFor('a sync without it', () => honest[0].committed.length > before);
  assert.deepEqual(honest.map(endReason), [undefined, undefined, undefined], 'no honest member is removed with it');
});

test('in a group of 2 a disputed receipt is word against word: the round is aborted and neither member is removed', async () => {
  // The liar says it gathered another aggregate from its one group mate, yet ends with the same model.
  // No third member saw that part, so recomputation cannot say who lied: both sit out (with two
  // members that leaves too few, so both take part again), and the next round is disputed the same way.
  // Convicting both, as one voice against one did, removed the honest member with it.
  const { id, honest, attacker } = await jobWith({ groupReport: lie((d) => ({ gathered: d.gathered.map((x) => (x === d.aggregate ? x : WRONG)) })) }, 1);
  const disputed = async () => (await roundsOf(id)).filter((r) => r.outcome === 'aborted' && /digests disagree/.test(r.detail));
  // A hang bound (alone it takes under a second), wide enough for a machine busy beside the suite.
  await waitFor('two disputed rounds', async () => (await disputed()).length >= 2, 60_000, 50);
  assert.deepEqual([endReason(honest[0]), endReason(attacker)], [undefined, undefined], 'nobody is removed');
  assert.match(testServer().logTail(200), /unsettled: v-[0-9a-f]+ vs v-[0-9a-f]+/);
});
