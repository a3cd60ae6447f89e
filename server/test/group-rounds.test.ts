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

test('one disagreeing pair cannot be told apart: both are removed, and the job goes on with the rest', async () => {
  // The liar contradicts only the owner of part 0 (a single pair).
  const { honest, attacker } = await jobWith({ groupReport: lie((d) => ({ gathered: d.gathered.map((x, j) => (j === 0 ? WRONG : x)) })) }, 3);
  await waitFor('the liar is removed', () => endReason(attacker));
  const removed = honest.filter((s) => endReason(s));
  assert.equal(removed.length, 1, 'with it, the owner of part 0');
  const rest = honest.filter((s) => !endReason(s));
  const before = rest[0].committed.length;
  await waitFor('a sync without them', () => rest[0].committed.length > before);
});

test('a group round result without its report, or with a report of the wrong shape, is refused and changes nothing', async () => {
  const created = await testServer().createJob({ minWorkers: 2, maxWorkers: 2, H: 1, targetSteps: 1000 });
  const a = await testServer().volunteer();
  const b = await testServer().volunteer();
  a.holdRounds = true;
  await a.request(created.id);
  await b.request(created.id);
  const begin = await waitFor('a round', () => a.events.find((e) => e.name === 'round:begin')?.payload as RoundBegin | undefined);
  const result = { jobId: created.id, roundId: begin.roundId, checksum: '0123456789abcdef', step: 1, metrics: { loss: 1, samples: 1, wallMs: 1, bytesSent: 0, bytesReceived: 0 } };
  const missing = await a.emit('round:result', result);
  assert.equal(!missing.ok && missing.error.code, 'bad_request');
  assert.match(!missing.ok ? missing.error.message : '', /group report/);
  const digest = '0'.repeat(32);
  const short = await a.emit('round:result', { ...result, group: { refused: [], digests: { sent: [digest], received: [digest], aggregate: digest, gathered: [digest] } } });
  assert.equal(!short.ok && short.error.code, 'bad_request');
  const stranger = await a.emit('round:result', { ...result, group: { refused: [{ member: 'nobody', reason: 'x' }], digests: { sent: [digest, digest], received: [digest, digest], aggregate: digest, gathered: [digest, digest] } } });
  assert.equal(!stranger.ok && stranger.error.code, 'bad_request');
  // Nothing was recorded: released, the round commits with the honest reports.
  a.releaseRound();
  await waitFor('the round commits', () => a.committed.includes(1) && b.committed.includes(1));
  assert.ok(sameParameters([a, b], 1));
});

test('an untrusted job is one group of at most 16 members', async () => {
  const r = await testServer().api('/api/jobs', { method: 'POST', json: { preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 2, hyperparameters: { lr: 0.1, batchSize: 32 }, maxWorkers: 17, targetSteps: 10 } });
  assert.equal(r.status, 400);
  assert.match(r.text, /at most 16/);
  const trusted = await testServer().api('/api/jobs', { method: 'POST', json: { preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 2, hyperparameters: { lr: 0.1, batchSize: 32 }, maxWorkers: 17, targetSteps: 10, trust: 'trusted' } });
  assert.equal(trusted.status, 201);
});

test('in a group round every member may signal every other member, and nobody else', async () => {
  const created = await testServer().createJob({ minWorkers: 3, maxWorkers: 3, H: 1, targetSteps: 1000 });
  const sims = await Promise.all([0, 1, 2].map(() => testServer().volunteer()));
  for (const s of sims) s.holdRounds = true;
  for (const s of sims) await s.request(created.id);
  const outsider = await testServer().volunteer();
  const begin = await waitFor('round:begin', () => sims[0].events.find((e) => e.name === 'round:begin')?.payload as RoundBegin | undefined);
  assert.equal(begin.mode, 'group');
  const sdp = { type: 'offer', sdp: 'v=0 simulated' };
  for (const from of sims) {
    for (const to of sims) {
      if (from === to) continue;
      const ack = await from.emit('signal', { jobId: created.id, roundId: begin.roundId, to: to.volunteerId, data: sdp });
      assert.equal(ack.ok, true, `${from.volunteerId} → ${to.volunteerId}`);
    }
  }
  const toOutsider = await sims[0].emit('signal', { jobId: created.id, roundId: begin.roundId, to: outsider.volunteerId, data: sdp });
  assert.equal(!toOutsider.ok && toOutsider.error.code, 'not_neighbour');
  const fromOutsider = await outsider.emit('signal', { jobId: created.id, roundId: begin.roundId, to: sims[0].volunteerId, data: sdp });
  assert.equal(fromOutsider.ok, false);
  for (const s of sims) s.releaseRound();
});
