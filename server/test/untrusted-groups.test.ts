// Untrusted jobs past 16 members average in Moshpit groups of at most 16 that the server draws at
// random every sync, each a checked group round (screening and CenteredClip per part, digests,
// validators, disputes settled by recomputation), through the real server and Socket.IO with
// simulated volunteers from their own loopback addresses (/32 networks). The old server refused such
// a job (an untrusted job was one group of at most 16): every behaviour here is new.
import assert from 'node:assert/strict';
import { after, afterEach, before, test } from 'node:test';
import type { GroupReport, RoundBegin } from '@tabfleet/protocol';
import { waitFor, type SimOptions, type SimVolunteer } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer({
    networkRules: { v4: 32, v6: 128 }, addressLimits: { connections: 100, jobShare: 0.5 },
    timing: { roundTimeoutMs: 30_000, barrierTimeoutMs: 30_000, loadTimeoutMs: 30_000 },
  });
});
after(() => server.stop());
afterEach(() => server.stopJobs());

const endReason = (s: SimVolunteer) => (s.events.find((e) => e.name === 'job:end')?.payload as { reason: string } | undefined)?.reason;
const KEPT = { appliedKept: 8, eventsKept: 400 } satisfies Partial<SimOptions>;

/**
 * `honest` volunteers from addresses of their own, then `others` (their address and options), all in
 * one untrusted job in groups of 16 that syncs once `minWorkers` are in (an attack's job goes on
 * without the attacker).
 */
async function untrustedJob(honest: number, others: { host: number; opts?: Partial<SimOptions> }[], minWorkers = honest) {
  const total = honest + others.length;
  const job = await server.createJob({ minWorkers, maxWorkers: total, H: 1, groupSize: 16, targetSteps: 1000, checkpointEvery: 1000 });
  const sims: SimVolunteer[] = [];
  // Honest ones first: a network may not be a majority of the members when it joins.
  for (let i = 0; i < honest; i++) sims.push(await server.volunteer({ localAddress: `127.0.0.${10 + i}`, ...KEPT }));
  for (const o of others) sims.push(await server.volunteer({ localAddress: `127.0.0.${o.host}`, ...KEPT, ...o.opts }));
  for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
  return { id: job.id, honest: sims.slice(0, honest), others: sims.slice(honest), all: sims };
}

/** Each sync's groups as the members were told them (round id → members). */
function groupsOf(sims: SimVolunteer[], seq: number): Map<number, string[]> {
  const groups = new Map<number, string[]>();
  for (const s of sims) {
    for (const e of s.events) {
      const b = e.payload as RoundBegin;
      if (e.name === 'round:begin' && b.seq === seq) groups.set(b.roundId, b.members);
    }
  }
  return groups;
}

function sameAt(sims: SimVolunteer[], seq: number): boolean {
  const [first, ...rest] = sims.map((s) => s.applied.get(seq));
  return !!first && rest.every((p) => p && p.every((v, i) => Object.is(v, first[i])));
}

test('40 volunteers, 8 of one network: every sync commits in 3 checked groups of at most 16, drawn afresh, the network never over half of one', async () => {
  const { id, all, others: sybils } = await untrustedJob(32, Array.from({ length: 8 }, () => ({ host: 9 })), 40);
  await waitFor('4 syncs everywhere', () => all.every((s) => s.committed.length >= 4), 120_000, 100).catch((e) => { throw new Error(`${e.message}\n${server.logTail(80)}`); });
  const splits = new Set<string>();
  const sybilIds = new Set(sybils.map((s) => s.volunteerId));
  for (const seq of [1, 2, 3, 4]) {
    const groups = [...groupsOf(all, seq).entries()];
    assert.equal(groups.length, 3, `sync ${seq}: ${groups.length} groups`);
    assert.equal(groups.flatMap(([, g]) => g).length, 40, `sync ${seq}: everyone in one group`);
    for (const [roundId, g] of groups) {
      assert.ok(g.length <= 16, `group round ${roundId} has ${g.length} members`);
      const fromNetwork = g.filter((x) => sybilIds.has(x)).length;
      assert.ok(fromNetwork * 2 <= g.length, `group round ${roundId}: ${fromNetwork} of ${g.length} from one network`);
      // A group's members hold one model after its sync; the groups' models differ until they mix.
      assert.ok(sameAt(all.filter((s) => g.includes(s.volunteerId)), seq), `group round ${roundId} of sync ${seq}`);
    }
    splits.add(groups.map(([, g]) => [...g].sort().join('+')).sort().join(' | '));
  }
  assert.equal(splits.size, 4, 'the groups change every sync');
  const begins = all.flatMap((s) => s.events.filter((e) => e.name === 'round:begin').map((e) => e.payload as RoundBegin));
  assert.ok(begins.every((b) => b.mode === 'group' && b.grouped === true && b.members.length <= 16));
  const rounds = (await server.api(`/api/jobs/${id}/rounds`)).body.rounds as { seq: number; mode: string; outcome: string; detail: string }[];
  for (const seq of [1, 2, 3, 4]) assert.ok(rounds.some((r) => r.seq === seq && r.mode === 'group' && r.outcome === 'committed' && /3 of 3 groups committed/.test(r.detail)), JSON.stringify(rounds));
  for (const s of all) assert.deepEqual(s.errors, []);
});

test('a member that scales its values by 1e6 is refused by its group\'s owners and removed; its group and the others commit without its values', async () => {
  const { all, honest, others: [attacker] } = await untrustedJob(32, [{ host: 200, opts: { contribution: (p) => p.map((v) => v * 1e6) } }]);
  await waitFor('the attacker is removed', () => endReason(attacker), 120_000, 100);
  assert.match(endReason(attacker)!, /refused by most owners/);
  await waitFor('3 syncs for the honest', () => honest.every((s) => s.committed.length >= 3), 120_000, 100);
  const seq = Math.max(...[...attacker.events].filter((e) => e.name === 'round:begin').map((e) => (e.payload as RoundBegin).seq));
  const group = [...groupsOf(all, seq).values()].find((g) => g.includes(attacker.volunteerId))!;
  const mates = honest.filter((s) => group.includes(s.volunteerId));
  assert.ok(mates.length >= 8, `its group had ${mates.length} honest members`);
  assert.ok(mates.every((s) => s.committed.includes(seq)), 'its group committed the sync it spoiled');
  for (const s of honest) for (const [at, p] of s.applied) assert.ok(p.every((v) => Number.isFinite(v) && Math.abs(v) < 10), `sync ${at}: a parameter left the honest range`);
  assert.ok(honest.every((s) => !endReason(s)), 'no honest member is removed');
});

const WRONG = 'f'.repeat(32);

test('an owner that lies about its aggregate is caught in its group: the liar alone is removed, its group runs again without it and commits that sync', async () => {
  const lie = (h: GroupReport): GroupReport => ({ ...h, digests: { ...h.digests, aggregate: WRONG } });
  const { all, honest, others: [liar] } = await untrustedJob(32, [{ host: 200, opts: { groupReport: lie } }]);
  await waitFor('the liar is removed', () => endReason(liar), 120_000, 100);
  assert.match(endReason(liar)!, /disagrees with its group/);
  const seq = Math.max(...[...liar.events].filter((e) => e.name === 'round:begin').map((e) => (e.payload as RoundBegin).seq));
  const groups = [...groupsOf(all, seq)];
  const [firstId, mine] = groups.find(([, g]) => g.includes(liar.volunteerId))!;
  const mates = honest.filter((s) => mine.includes(s.volunteerId));
  await waitFor('every honest member commits that sync', () => honest.every((s) => s.committed.includes(seq)), 120_000, 100);
  assert.ok(mates.length >= 8, `${mates.length} honest members in the liar's group`);
  // The old server left the group out of the sync: its members committed nothing of it.
  const rerun = groups.find(([id, g]) => id !== firstId && g.every((x) => mine.includes(x)) && !g.includes(liar.volunteerId));
  assert.ok(rerun, `the liar's group (round ${firstId}) began again without it: ${JSON.stringify(groups)}`);
  assert.deepEqual([...rerun[1]].sort(), mates.map((s) => s.volunteerId).sort(), 'the rerun is the group less the liar');
  assert.equal(liar.committed.includes(seq), false);
  assert.ok(sameAt(mates, seq), 'the liar\'s group mates hold one model after the rerun');
  assert.ok(honest.every((s) => !endReason(s)), 'no honest member is removed');
  for (const s of all) assert.deepEqual(s.errors, []);
});
