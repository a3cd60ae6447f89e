// `npm run simulate -- --quick` end to end into a temporary file: every scenario ran through the real
// coordinator, the simulator was checked against real volunteers, and with no churn a sync takes what
// the model says it must: the slowest member's H steps plus a ring allreduce on the modeled links.
// Regional groups commit more syncs than groups at random when links across regions are slow.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runBench } from './child';
import { consensusRounds } from './simulate';
import { ATTACKS } from './simulated-group';
import { ringAllreduceMs, simulate, type Scenario } from './simulator';
import { missingRecord } from './machine';

const dir = mkdtempSync(join(tmpdir(), 'tabfleet-bench-simulate-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('npm run simulate -- --quick writes a complete JSON', { timeout: 4 * 60_000 }, async (t) => {
  const out = join(dir, 'scale.json');
  assert.equal(await runBench(['simulate', '--quick', '--out', out], t.signal), 0);
  const r = JSON.parse(readFileSync(out, 'utf8'));
  assert.deepEqual(missingRecord(r), [], 'the run\'s commit, date, command, machine and duration (runRecord)');
  assert.equal(r.benchmark, 'scale');
  // Moshpit groups of 16 at N = 16 and 64, with and without churn; then one ring at each N.
  assert.deepEqual(r.results.map((x: any) => [x.scenario.members, x.scenario.churnPer10Min, x.scenario.groupSize ?? null]), [[16, 0, 16], [16, 0.2, 16], [64, 0, 16], [64, 0.2,
    16], [16, 0, null], [64, 0, null]]);
  for (const x of r.results) assert.ok(x.syncs > 5 && x.utilization > 0 && x.utilization < 1, JSON.stringify(x));
  assert.equal(r.summary.sync_p99_ms_n16, r.results[0].syncMs.p99);
  // The check against real volunteers (N = 4 when quick): the ring's bytes are the link model's to
  // within the frames' rounding; the round time's error is the benchmark's figure, bounded loosely here.
  const [v] = r.validation.results;
  assert.equal(r.validation.results.length, 1);
  assert.equal(v.members, 4);
  assert.ok(v.error.bytesSentPerRound < 0.01, `bytes per round: real ${v.real.bytesSentPerRound}, simulated ${v.simulated.bytesSentPerRound}`);
  assert.ok(v.error.roundMs < 0.5, `round time: real ${v.real.roundMs} ms, simulated ${v.simulated.roundMs} ms`);
  assert.equal(r.summary.sim_vs_real_error, v.error.roundMs);
  assert.deepEqual(r.consensus.results.map((c: any) => [c.members, c.churnPer10Min, c.roundsTo1Percent]), [[16, 0, 1], [16, 0.2, 1], [64, 0, 2], [64, 0.2, 2]]);
  // Four regions, 150 ms across: groups laid out by region commit more syncs in the same time than at random (the simulation is seeded).
  // With no hints, from the round trips members report, the server finds the regions too.
  const [random, byRegion, byRoundTrips] = r.regional.results;
  assert.deepEqual(r.regional.results.map((x: any) => [x.scenario.regions.regional, x.scenario.regions.fromRoundTrips]), [[false, false], [true, false], [true, true]]);
  assert.ok(byRegion.syncs > random.syncs && byRegion.consensusSyncs !== null, `${byRegion.syncs} syncs by region, ${random.syncs} at random`);
  assert.ok(byRoundTrips.syncs > random.syncs && byRoundTrips.consensusSyncs !== null, `${byRoundTrips.syncs} syncs by round trips, ${random.syncs} at random`);
  // Group sizes 4 to 32 at N = 64: a bigger group's longest ring is longer, and it mixes in no more syncs.
  const sizes = r.groupSizes.results;
  assert.deepEqual(sizes.map((g: any) => g.groupSize), [4, 8, 16, 32]);
  for (let i = 1; i < sizes.length; i++) {
    assert.ok(sizes[i].fixed.roundP99Ms > sizes[i - 1].fixed.roundP99Ms, JSON.stringify(sizes));
    assert.ok(sizes[i].fixed.consensusSyncs <= sizes[i - 1].fixed.consensusSyncs, JSON.stringify(sizes));
  }
  assert.ok([4, 8, 16, 32].includes(r.summary.fastest_consensus_group_size));
  // Untrusted (quick: N = 64, 10% attackers): the section ran through the checks; its N = 10,000 keys are the full run's.
  const [untrusted] = r.untrusted.results;
  assert.deepEqual([r.untrusted.results.length, untrusted.scenario.members, untrusted.scenario.attackers.share], [1, 64, 0.1]);
  assert.ok(untrusted.syncs > 5 && untrusted.untrusted.counters.rounds_validated > 0, JSON.stringify(untrusted.untrusted));
  assert.equal(r.summary.untrusted_utilization_n10000, null);
});

test('without churn a simulated sync lasts the slowest member\'s steps plus the ring allreduce', async () => {
  const s = { members: 8, churnPer10Min: 0, pacing: 'fixed' as const, durationMs: 60_000, stepMs: 50, stepSigma: 0, bandwidthBytesPerSec: 1.25e6, latencyMs: 40, seed: 3 };
  const r = await simulate(s);
  const expected = 8 * 50 + ringAllreduceMs(8, 203_530 * 4, s);
  assert.ok(Math.abs(r.syncMs!.p50 - expected) / expected < 0.02, `sync ${r.syncMs!.p50} ms, model ${expected} ms`);
  assert.equal(r.aborted, 0);
  assert.ok(Math.abs(r.utilization - (8 * 50) / expected) < 0.05, `utilization ${r.utilization}`);
  const big = await simulate({ ...s, members: 1_024 });
  assert.match(big.refused ?? '', /at most 256 members/);
});

test('a Moshpit job of 1,024 in groups of 16 through the real coordinator: rounds are rings of a group (16 or 4 on the 16 × 16 × 4 grid), ' +
  'and the members agree after one sync per axis', async () => {
  const s = { members: 1_024, churnPer10Min: 0, pacing: 'fixed' as const, durationMs: 60_000, stepMs: 50, stepSigma: 0, bandwidthBytesPerSec: 1.25e6, latencyMs: 40, seed: 3, groupSize: 16 };
  const r = await simulate(s);
  const bytes = 203_530 * 4;
  assert.equal(r.aborted, 0);
  assert.ok(Math.abs(r.roundMs!.p99 - ringAllreduceMs(16, bytes, s)) < 1, `group round p99 ${r.roundMs!.p99} ms`);
  assert.ok(Math.abs(r.roundMs!.p50 - ringAllreduceMs(4, bytes, s)) < 1, `group round p50 ${r.roundMs!.p50} ms (a third of the syncs are on the axis of 4)`);
  // A full grid: after its 3 axes every member holds the global mean exactly.
  assert.equal(r.consensusSyncs, 3);
  assert.ok(r.syncs > 10);
});

test('Moshpit consensus: one group is one round; 10,000 members in groups of 16 are within 1% in at most 2·log2(N/16) rounds, with departures too', () => {
  assert.equal(consensusRounds(16, 0), 1);
  const n10k = consensusRounds(10_000, 0)!;
  assert.ok(n10k >= 4 && n10k <= 2 * Math.log2(10_000 / 16), `${n10k} rounds`);
  // A fifth of the members leaving every round (far beyond 5% per 10 minutes) slows it, and joiners
  // that load a member's model do not undo it.
  const churned = consensusRounds(10_000, 0.2);
  assert.ok(churned !== null && churned >= n10k && churned <= 2 * Math.log2(10_000 / 16), `${churned} rounds with churn`);
});

const UNTRUSTED_64: Scenario = { members: 64, churnPer10Min: 0.05, pacing: 'fixed', durationMs: 120_000, stepMs: 45, stepSigma: 0.25, bandwidthBytesPerSec: 1.25e6, latencyMs: 40,
  seed: 1, groupSize: 16, attackers: { share: 0.1, kinds: ATTACKS } };

test('an untrusted job of 64 in random groups of 16, 10% attackers and churn: the coordinator\'s checks remove the scalers (refused by the owners) and ' +
  'the lying owners (validators, then its recomputation), each time they rejoin, never an honest member; sign flips pass, bounded by centered clip', async () => {
  const r = await simulate(UNTRUSTED_64);
  const u = r.untrusted!;
  assert.equal(u.evicted.honest, 0, JSON.stringify(u));
  assert.ok(u.evicted.byAttack.scale >= 2 && u.counters.contributions_refused >= u.evicted.byAttack.scale, JSON.stringify(u));
  assert.ok(u.evicted.byAttack['wrong-aggregate'] >= 1 && u.counters.validation_disputes >= u.evicted.byAttack['wrong-aggregate'], JSON.stringify(u));
  assert.equal(u.evicted.byAttack['sign-flip'], undefined, 'no check can tell a sign flip of parameters from an honest member\'s');
  // Evicted attackers rejoin under fresh identities and addresses, and are caught again (2 of each attack at the start).
  assert.ok(u.evicted.byAttack.scale > 2 && u.evicted.byAttack['wrong-aggregate'] > 2, JSON.stringify(u));
  // A caught lying owner's group runs again without it and commits (it sat its sync out before: 181 groups committed,
  // 55 failed at seed 1; now 156 committed, 43 rerun, none failed). Every part of a member on probation is checked,
  // and a rejoined attacker is always on probation, so no lie is applied and the honest members come to agree.
  assert.ok(u.counters.groups_rerun >= 1 && u.counters.groups_committed > 10 * u.counters.groups_failed, JSON.stringify(u));
  assert.ok(r.syncs > 10, `${r.syncs} syncs`);
  assert.ok(r.consensusSyncs !== null && r.consensusSyncs < r.syncs, `honest consensus in ${r.consensusSyncs} of ${r.syncs} syncs`);
});

test('an untrusted job without attackers or churn: every group commits, nobody is evicted, and the members agree within a few syncs', async () => {
  const r = await simulate({ ...UNTRUSTED_64, churnPer10Min: 0, attackers: { share: 0, kinds: [] } });
  assert.deepEqual([r.untrusted!.counters.groups_failed, r.evictions, r.aborted], [0, 0, 0]);
  assert.ok(r.untrusted!.counters.groups_committed >= r.syncs && r.syncs > 10, JSON.stringify(r.untrusted));
  // Random groups mix less per sync than the trusted grid (a group's mean keeps ~0.22 of the spread at N = 64: 1% in 4–5 syncs, not the grid's 2).
  // The groups are the server's own unseeded draws: 30 runs gave 4 (20), 5 (7), 6 (2) and 8 (1), and one CI run 8, past the bound of 7 first set.
  assert.ok(r.consensusSyncs !== null && r.consensusSyncs <= 10, `consensus in ${r.consensusSyncs} syncs`);
  assert.match((await simulate({ ...UNTRUSTED_64, groupSize: undefined })).refused ?? '', /averages in Moshpit groups/);
  assert.match((await simulate({ ...UNTRUSTED_64, attackers: { share: 0.1, kinds: [] } })).refused ?? '', /at least one kind of attack/);
});
