// `npm run simulate`: the discrete-event simulation of one job's round clock at scale (simulator.ts:
// the real coordinator with simulated volunteers), checked against the real system at N = 4–16
// (simulate-validate.ts). Jobs of N = 16 … 10,000 average in Moshpit groups of 16 (the coordinator's
// grouped syncs); N ≤ 256 also as one ring, for comparison. It reports round and sync time
// distributions, utilization (members' compute ÷ their time in the job), syncs committed and
// aborted, syncs to consensus of synthetic member vectors, and the server's CPU per sync.
// Consensus is also measured apart from the coordinator (consensusRounds): the same vectors averaged
// in protocol's moshpitGroups directly, with departures. Untrusted jobs of 10,000 with attackers are
// simulate-untrusted.ts's section; `--only untrusted` re-runs it alone into the existing JSON.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { repoRoot } from '@tabfleet/headless';
import { LIMITS, moshpitGroups, mulberry32 } from '@tabfleet/protocol';
import type { BenchOptions } from './run';
import { benchCommand, earlierReport, runRecord } from './machine';
import { median, spread } from './stats';
import { runUntrusted, type ScenarioBase } from './simulate-untrusted';
import { validateAt, type Validation } from './simulate-validate';
import { CONSENSUS_DIMS, simulate, type Scenario, type ScenarioResult } from './simulator';

/** Moshpit groups at scale: members per group. */
export const CONSENSUS_GROUP = 16;

/**
 * Rounds of Moshpit averaging (groups of CONSENSUS_GROUP) until every member is within 1% of the
 * members' mean, relative to the spread at the start: members start from independent random vectors
 * (no local steps between rounds), and each round a member leaves with probability `leaveP` before
 * averaging (its group averages without it) and is replaced by a joiner that loads a random member's
 * vector, as joiners load a checkpoint. Null if not within 100 rounds.
 */
export function consensusRounds(n: number, leaveP: number, seed = 1): number | null {
  const rand = mulberry32(seed);
  let xs = Array.from({ length: n }, () => Float64Array.from({ length: CONSENSUS_DIMS }, () => rand()));
  const distance = () => {
    const mean = new Float64Array(CONSENSUS_DIMS);
    for (const x of xs) for (let k = 0; k < CONSENSUS_DIMS; k++) mean[k] += x[k] / n;
    return Math.max(...xs.map((x) => Math.hypot(...x.map((v, k) => v - mean[k]))));
  };
  const start = distance();
  for (let round = 0; round < 100; round++) {
    const present = xs.map(() => rand() >= leaveP);
    for (const group of moshpitGroups(xs.map((_, i) => i), round, CONSENSUS_GROUP, seed)) {
      const stay = group.filter((i) => present[i]);
      if (!stay.length) continue;
      const mean = new Float64Array(CONSENSUS_DIMS);
      for (const i of stay) for (let k = 0; k < CONSENSUS_DIMS; k++) mean[k] += xs[i][k] / stay.length;
      for (const i of stay) xs[i] = mean.slice();
    }
    const stayed = xs.filter((_, i) => present[i]);
    xs = xs.map((x, i) => (present[i] || !stayed.length ? x : stayed[Math.floor(rand() * stayed.length)].slice()));
    if (distance() <= 0.01 * start) return round + 1;
  }
  return null;
}

/** Every link of the scenarios and of the check against real volunteers: 10 Mbit/s, 40 ms one way. */
const LINK = { bandwidthBytesPerSec: 1.25e6, latencyMs: 40 };

/** Paced jobs' nominal local steps (DiLoCo's H ≈ 500): a member may do up to 4× this, so the budget of 9 exchanges binds, not the cap. */
const PACED_H = 512;

/**
 * The scenarios, on 10 Mbit/s links with 40 ms latency and 45 ms steps (SwiftShader's MLP step):
 * Moshpit groups of 16 at every N × churn × pacing; one ring where a ring can hold the job. Fixed H = 8
 * gives 0.36 s of compute against a group's 2.4 s ring on these links (utilization ≤ 0.13 at any N);
 * paced rounds give each member the steps its pace fits in a budget of 9 exchanges (about 22 s).
 * Simulated 30 minutes each (N = 10,000: 10 minutes, the churn's unit).
 */
export function scenarios(quick: boolean): Scenario[] {
  const sizes = quick ? [16, 64] : [16, 256, 1_024, 10_000];
  const churns = quick ? [0, 0.2] : [0, 0.05, 0.2];
  const base = { stepMs: 45, stepSigma: 0.25, ...LINK, seed: 1 };
  const durationMs = (members: number) => (quick ? 120_000 : members >= 10_000 ? 600_000 : 1_800_000);
  const pacings = quick ? (['fixed'] as const) : (['fixed', 'paced'] as const);
  const H = (pacing: Scenario['pacing']) => (pacing === 'paced' ? PACED_H : 8);
  const grouped = sizes.flatMap((members) => churns.flatMap((churnPer10Min) => pacings.map((pacing) => ({ ...base, members, churnPer10Min, pacing, H: H(pacing),
    groupSize: CONSENSUS_GROUP, durationMs: durationMs(members) }))));
  const ring = sizes.filter((n) => n <= LIMITS.maxWorkersPerJob).flatMap((members) => (quick ? [0] : churns).flatMap((churnPer10Min) => pacings.map((pacing) => ({ ...base,
    members, churnPer10Min, pacing, H: H(pacing), durationMs: durationMs(members) }))));
  return [...grouped, ...ring];
}

/** Seeds of the headline figures (N = 16 and N = 10,000 with 5% churn, fixed and paced): seed 1 is the full grid's run. */
const HEADLINE_SEEDS = [1, 2, 3];

/** The headline scenarios (members, churn, pacing) that are run again with the other seeds. */
const HEADLINE = [[16, 0, 'fixed'], [16, 0, 'paced'], [10_000, 0.05, 'fixed'], [10_000, 0.05, 'paced']] as const;

interface HeadlineRuns {
  base16?: ScenarioResult;
  paced16?: ScenarioResult;
  n10k?: ScenarioResult;
  paced10k?: ScenarioResult;
}

/** One seed's headline figures (see the summary's comments). */
function headlineOf(r: HeadlineRuns, consensusDirect: number | null) {
  const { base16, paced16, n10k, paced10k } = r;
  return {
    round_p99_ratio_n10000: n10k?.roundMs && base16?.roundMs ? n10k.roundMs.p99 / base16.roundMs.p50 : null,
    sync_p99_ratio_n10000: n10k?.syncMs && base16?.syncMs ? n10k.syncMs.p99 / base16.syncMs.p99 : null,
    sync_p99_ratio_n10000_paced: paced10k?.syncMs && paced16?.syncMs ? paced10k.syncMs.p99 / paced16.syncMs.p99 : null,
    utilization_n10000: paced10k?.utilization ?? null,
    utilization_n16_paced: paced16?.utilization ?? null,
    utilization_n10000_fixed: n10k?.utilization ?? null,
    consensus_rounds_n10000: n10k?.consensusSyncs ?? null,
    consensus_rounds_n10000_direct: consensusDirect,
  };
}
type Headline = ReturnType<typeof headlineOf>;

/** Per key: the median over seeds (null if any seed has none) and the spread. */
function acrossSeeds(perSeed: Headline[]): { medians: Headline; spreads: Record<string, ReturnType<typeof spread>> } {
  const keys = Object.keys(perSeed[0]) as (keyof Headline)[];
  const values = (k: keyof Headline) => perSeed.map((h) => h[k]);
  const complete = (k: keyof Headline) => values(k).every((v): v is number => v !== null);
  return {
    medians: Object.fromEntries(keys.map((k) => [k, complete(k) ? median(values(k) as number[]) : null])) as Headline,
    spreads: Object.fromEntries(keys.map((k) => [k, complete(k) ? spread(values(k) as number[]) : null])),
  };
}

/** The group sizes compared (the issue's 8–16 and either side of it). */
const GROUP_SIZES = [4, 8, 16, 32];

/**
 * What a group size costs and buys: N = 1,024 (quick: 64) with 5% churn in Moshpit groups of each of
 * GROUP_SIZES, fixed H = 8 (syncs the links' length) and paced. A bigger group mixes more per sync
 * (consensus in fewer) but its ring is longer (2(g − 1) hops of latency); the figure to compare is
 * the time to consensus, its syncs at the mean sync time.
 */
export function groupSizeScenarios(quick: boolean): Scenario[] {
  const base = { stepMs: 45, stepSigma: 0.25, ...LINK, seed: 1, churnPer10Min: 0.05, members: quick ? 64 : 1_024, durationMs: quick ? 120_000 : 1_800_000 };
  return GROUP_SIZES.flatMap((groupSize) => (quick ? (['fixed'] as const) : (['fixed', 'paced'] as const)).map((pacing) => ({ ...base, groupSize, pacing, H: pacing === 'paced' ? PACED_H : 8 })));
}

/** A group size's figures from its runs: syncs to consensus, the sync's median, and the time to consensus (ms: those syncs at the mean sync time). */
function groupSizeFigures(runs: ScenarioResult[]) {
  return GROUP_SIZES.map((groupSize) => {
    const at = (pacing: Scenario['pacing']) => runs.find((r) => r.scenario.groupSize === groupSize && r.scenario.pacing === pacing);
    const figures = (r: ScenarioResult | undefined) => r && {
      syncs: r.syncs, consensusSyncs: r.consensusSyncs, syncP50Ms: r.syncMs?.p50 ?? null, roundP50Ms: r.roundMs?.p50 ?? null, roundP99Ms: r.roundMs?.p99 ?? null, utilization: r.utilization,
      // The mean sync, not the median: an uneven grid (32 × 2 at N = 64) alternates long and short syncs.
      msToConsensus: r.consensusSyncs !== null && r.syncs ? (r.consensusSyncs * r.scenario.durationMs) / r.syncs : null,
    };
    return { groupSize, fixed: figures(at('fixed')) ?? null, paced: figures(at('paced')) ?? null };
  });
}

/** Regions: 4, 40 ms inside one (LINK), 150 ms across (a transatlantic hop). */
const REGIONS = { count: 4, crossLatencyMs: 150 };

/**
 * Moshpit groups laid out at random against by region (regionalGroups), members spread over REGIONS
 * at random, 5% churn: N = 1,024 (a 16 × 16 × 4 grid: two of its three axes can stay inside a region
 * of ~256) fixed and paced, N = 10,000 paced.
 */
export function regionalScenarios(quick: boolean): Scenario[] {
  const base = { stepMs: 45, stepSigma: 0.25, ...LINK, seed: 1, churnPer10Min: 0.05, groupSize: CONSENSUS_GROUP };
  const runs = quick
    ? [{ members: 64, pacing: 'fixed' as const, H: 8, durationMs: 120_000 }]
    : [{ members: 1_024, pacing: 'fixed' as const, H: 8, durationMs: 1_800_000 }, { members: 1_024, pacing: 'paced' as const, H: PACED_H, durationMs: 1_800_000 },
      { members: 10_000, pacing: 'paced' as const, H: PACED_H, durationMs: 600_000 }];
  const layouts = (members: number): RegionalLayout[] => (members <= 1_024 ? ['random', 'hint', 'rtt'] : ['random', 'hint']);
  return runs.flatMap((r) => layouts(r.members).map((layout) => ({ ...base, ...r, regions: { ...REGIONS, regional: layout !== 'random', fromRoundTrips: layout === 'rtt' } })));
}

/** How a regional scenario lays out its groups: at random, by region hint, or from the round trips members measured (no hints). */
type RegionalLayout = 'random' | 'hint' | 'rtt';
const layoutOf = (s: Scenario): RegionalLayout => (!s.regions?.regional ? 'random' : s.regions.fromRoundTrips ? 'rtt' : 'hint');

const LAYOUT_NAMES: Record<RegionalLayout, string> = { random: 'at random', hint: 'by region hint', rtt: 'by measured round trips' };
const describe = (s: Scenario) => {
  const regions = s.regions ? ` (${LAYOUT_NAMES[layoutOf(s)]}, ${s.regions.count} regions)` : '';
  return `N=${s.members} ${s.groupSize ? `groups of ${s.groupSize}${regions}` : 'one ring'}, churn ${s.churnPer10Min * 100}%/10 min, ${s.pacing} (H ${s.H})`;
};

/** What the untrusted section's scenarios share with the others. */
const UNTRUSTED_BASE: ScenarioBase = { stepMs: 45, stepSigma: 0.25, ...LINK, pacedH: PACED_H };

/** Sections `--only` may re-run into an existing scale.json. */
const RERUNNABLE = ['untrusted'];

export async function run(opts: BenchOptions): Promise<void> {
  const file = opts.out ?? join(repoRoot, 'bench', 'results', 'scale.json');
  if (opts.only) return rerun(file, opts);
  const t0 = Date.now();
  const results: ScenarioResult[] = [];
  for (const s of scenarios(opts.quick)) {
    const r = await simulate(s);
    results.push(r);
    console.log(`${describe(s)}: ${r.refused ?? `${r.syncs} syncs, ${r.aborted} aborted, round p50 ${r.roundMs?.p50.toFixed(0)} p99 ${r.roundMs?.p99.toFixed(0)} ms, ` +
      `sync p50 ${r.syncMs?.p50.toFixed(0)} p99 ${r.syncMs?.p99.toFixed(0)} ms, utilization ${r.utilization.toFixed(2)}, consensus in ${r.consensusSyncs ?? '-'} ` +
      `syncs, server CPU ${r.serverCpuMsPerSync.toFixed(2)} ms/sync (${(r.wallMs / 1000).toFixed(1)} s wall)`}`);
  }
  const regional: ScenarioResult[] = [];
  for (const s of regionalScenarios(opts.quick)) {
    const r = await simulate(s);
    regional.push(r);
    console.log(`${describe(s)}: ${r.syncs} syncs, round p50 ${r.roundMs?.p50.toFixed(0)} p99 ${r.roundMs?.p99.toFixed(0)} ms, sync p50 ${r.syncMs?.p50.toFixed(0)} ` +
      `p99 ${r.syncMs?.p99.toFixed(0)} ms, utilization ${r.utilization.toFixed(2)}, consensus in ${r.consensusSyncs ?? '-'} syncs (${(r.wallMs / 1000).toFixed(1)} s wall)`);
  }
  const bySize: ScenarioResult[] = [];
  for (const s of groupSizeScenarios(opts.quick)) {
    const r = await simulate(s);
    bySize.push(r);
    console.log(`${describe(s)}: ${r.syncs} syncs, round p50 ${r.roundMs?.p50.toFixed(0)} p99 ${r.roundMs?.p99.toFixed(0)} ms, sync p50 ${r.syncMs?.p50.toFixed(0)} ` +
      `ms, utilization ${r.utilization.toFixed(2)}, consensus in ${r.consensusSyncs ?? '-'} syncs (${(r.wallMs / 1000).toFixed(1)} s wall)`);
  }
  const groupSizes = groupSizeFigures(bySize);
  const fastestConsensus = (pacing: 'fixed' | 'paced') => {
    const timed = groupSizes.flatMap((g) => (g[pacing]?.msToConsensus != null ? [{ groupSize: g.groupSize, ms: g[pacing]!.msToConsensus! }] : []));
    return timed.length ? timed.reduce((a, b) => (b.ms < a.ms ? b : a)).groupSize : null;
  };
  const regionalAt = (n: number, pacing: Scenario['pacing'], byRegion: boolean | RegionalLayout) => {
    const layout = byRegion === true ? 'hint' : byRegion === false ? 'random' : byRegion;
    return regional.find((r) => r.scenario.members === n && r.scenario.pacing === pacing && layoutOf(r.scenario) === layout);
  };
  /** Syncs committed in the same simulated time, by region hint (or by measured round trips) ÷ at random. */
  const regionalGain = (n: number, pacing: Scenario['pacing'], layout: RegionalLayout = 'hint') => {
    const [random, laidOut] = [regionalAt(n, pacing, 'random'), regionalAt(n, pacing, layout)];
    return random?.syncs && laidOut ? laidOut.syncs / random.syncs : null;
  };
  const at = (n: number, churn: number, pacing: Scenario['pacing'] = 'fixed') =>
    results.find((r) => r.scenario.members === n && r.scenario.churnPer10Min === churn && r.scenario.groupSize && r.scenario.pacing === pacing);
  const base16 = at(16, 0);
  const n10k = at(10_000, 0.05);
  const paced16 = at(16, 0, 'paced'), paced10k = at(10_000, 0.05, 'paced');
  // Departures per round: churn per 10 minutes over the rounds in 10 minutes (a group's sync at N = 16).
  const roundMs = base16?.syncMs?.p50 ?? 1_000;
  const consensus = [...new Set(scenarios(opts.quick).map((s) => s.members))].flatMap((members) => [...new Set(scenarios(opts.quick).map((s) => s.churnPer10Min))].map((churnPer10Min) => {
    const leaveP = (churnPer10Min * roundMs) / 600_000;
    const rounds = consensusRounds(members, leaveP);
    console.log(`consensus: N=${members}, churn ${churnPer10Min * 100}%/10 min (${(100 * leaveP).toFixed(3)}% per round): ${rounds ?? '> 100'} rounds to 1%`);
    return { members, churnPer10Min, leavePerRound: leaveP, roundsTo1Percent: rounds };
  }));
  // The simulator against the real system (simulate-validate.ts): real volunteers at N = 4–16 on the same link model.
  const validation: Validation[] = [];
  for (const members of opts.quick ? [4] : [4, 8, 16]) validation.push(await validateAt(members, opts.quick ? 3 : 8, LINK));
  // A Moshpit job: 16 members in groups of 4 (a full 4 × 4 grid).
  if (!opts.quick) validation.push(await validateAt(16, 8, LINK, console.log, 4));
  const consensusAt = (n: number, churn: number) => consensus.find((c) => c.members === n && c.churnPer10Min === churn)?.roundsTo1Percent ?? null;
  // The headline scenarios again with the other seeds (step times, departures and groups drawn anew).
  const perSeed: Headline[] = [headlineOf({ base16, paced16, n10k, paced10k }, consensusAt(10_000, 0.05))];
  for (const seed of opts.quick ? [] : HEADLINE_SEEDS.slice(1)) {
    const runs: HeadlineRuns = {};
    for (const [members, churnPer10Min, pacing] of HEADLINE) {
      const scenario = scenarios(false).find((x) => x.members === members && x.churnPer10Min === churnPer10Min && x.pacing === pacing && x.groupSize)!;
      const r = await simulate({ ...scenario, seed });
      console.log(`seed ${seed}: ${describe(scenario)}: round p99 ${r.roundMs?.p99.toFixed(0)} ms, sync p99 ${r.syncMs?.p99.toFixed(0)} ms, utilization ` +
        `${r.utilization.toFixed(2)}, consensus in ${r.consensusSyncs ?? '-'} syncs`);
      runs[members === 16 ? (pacing === 'fixed' ? 'base16' : 'paced16') : pacing === 'fixed' ? 'n10k' : 'paced10k'] = r;
    }
    const leaveP = (0.05 * (runs.base16?.syncMs?.p50 ?? 1_000)) / 600_000;
    perSeed.push(headlineOf(runs, consensusRounds(10_000, leaveP, seed)));
  }
  const headline = acrossSeeds(perSeed);
  const untrusted = await runUntrusted(opts.quick, UNTRUSTED_BASE);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify({
    benchmark: 'scale', ...runRecord(t0, benchCommand('simulate', opts)), quick: opts.quick,
    setup: { groups: `Moshpit groups of ${CONSENSUS_GROUP} (the coordinator's grouped syncs); one ring for comparison at N ≤ ${LIMITS.maxWorkersPerJob}`,
      linkModel: 'every link 10 Mbit/s, 40 ms one way; ring allreduce of 2(N−1) steps of 1/N of the model in frames of at most 64 KiB, pipelined as the ring sends them',
        model: 'mlp-fashion (814 KB)', H: `8 fixed; paced: nominal ${PACED_H}, each member the steps its pace fits in the budget (at most 4×)`,
          stepMs: 'lognormal, median 45 ms, sigma 0.25 between members and steps', churn: 'Poisson departures, each replaced after 1 s' },
    results,
    regional: { definition: `members in ${REGIONS.count} regions at random, links 40 ms inside a region and ${REGIONS.crossLatencyMs} ms across, 5% churn; Moshpit ` +
      `groups of ${CONSENSUS_GROUP} laid out at random, by region hint (regionalGroups), and (N ≤ 1,024) by the round trips members measured, to a few peers when ` +
      `they joined (the join probe) and to their ring neighbours in rounds, with no hints`, results: regional },
    groupSizes: { definition: `N = ${opts.quick ? 64 : 1_024}, 5% churn, Moshpit groups of each size, fixed H = 8 and paced (nominal ${PACED_H}), seed 1; ` +
      `msToConsensus: syncs until every member is within 1% of the members' mean × the mean sync time (simulated time ÷ syncs)`, results: groupSizes, runs: bySize },
    validation: { definition: 'N Node volunteers (worker runtime, CPU backend) train the MLP with H = 8 through a real server over in-memory links of the same model, ' +
      'in one ring or (groupSize) in Moshpit groups; their measured work (commit to ready) is the simulator\'s work-time distribution; medians of round time (a ' +
      'sync\'s begin to its last commit, as the server records it), sync time (commit to commit as members see it) and bytes each member sends per round, real ' +
      'against simulated', results: validation },
    consensus: { groupSize: CONSENSUS_GROUP, definition: 'rounds of Moshpit averaging until max over members of ‖xᵢ − x̄‖ ≤ 1% of its value at the start (independent ' +
      'random 8-dim vectors, no local steps); departures before each round, replaced by joiners loading a random member\'s vector', results: consensus },
    untrusted,
    headline: { seeds: opts.quick ? [1] : HEADLINE_SEEDS, definition: 'the summary\'s N = 10,000 keys: medians over these seeds (seed 1 from the full grid above, the ' +
      'others rerun for the headline scenarios only), each seed\'s figures and their spread', perSeed, spreads: headline.spreads },
    summary: {
      // Medians over the headline seeds:
      // round_p99_ratio_n10000: a group's round (begin to commit) p99 at N = 10,000 with 5% churn ÷ the group's round time (p50) at N = 16; fixed H.
      // sync_p99_ratio_n10000(_paced): what members see, the p99 of their commit-to-commit times at N = 10,000 ÷ at N = 16.
      // utilization_n10000: paced Moshpit job, 5% churn (goal ≥ 0.8); beside it N = 16's, and fixed H's, which the links cap at 0.13.
      // consensus_rounds_n10000: syncs until the members' vectors are within 1% of their mean, through the coordinator's groups
      // (goal ≤ 2·log2(N / 16) = 18.6); _direct: the same without the coordinator, protocol's moshpitGroups applied directly.
      ...headline.medians,
      // untrusted_*: simulate-untrusted.ts (N = 10,000, 10% attackers, 5% churn; goals ≥ 0.8 and ≤ 19), medians over its seeds.
      ...untrusted.summary,
      /** Worst relative error of the predicted round time (begin to commit) at N = 4–16; the sync time's and the bytes' beside it. */
      sim_vs_real_error: Math.max(...validation.map((v) => v.error.roundMs)),
      sim_vs_real_sync_error: Math.max(...validation.map((v) => v.error.syncMs)),
      sim_vs_real_bytes_error: Math.max(...validation.map((v) => v.error.bytesSentPerRound)),
      sync_p99_ms_n16: base16?.syncMs?.p99 ?? null,
      /**
       * Regions (4, 150 ms across; seed 1): syncs committed in the same time with groups by region ÷ at
       * random (each sync waits for its slowest group, and only the grid's axis-0 syncs stay inside
       * regions); and what members see, their commit-to-commit p50, at random ÷ by region.
       */
      regional_syncs_ratio_n1024: regionalGain(1_024, 'fixed'),
      regional_syncs_ratio_n1024_paced: regionalGain(1_024, 'paced'),
      regional_syncs_ratio_n10000_paced: regionalGain(10_000, 'paced'),
      /** The same with no hints: groups from the round trips members measured, by their join probes and to their ring neighbours (the server's peer-distances.ts). */
      rtt_syncs_ratio_n1024: regionalGain(1_024, 'fixed', 'rtt'),
      rtt_syncs_ratio_n1024_paced: regionalGain(1_024, 'paced', 'rtt'),
      rtt_consensus_syncs_n1024: regionalAt(1_024, 'fixed', 'rtt')?.consensusSyncs ?? null,
      regional_sync_p50_speedup_n1024: regionalAt(1_024, 'fixed', false)?.syncMs && regionalAt(1_024, 'fixed', true)?.syncMs ? regionalAt(1_024, 'fixed',
        false)!.syncMs!.p50 / regionalAt(1_024, 'fixed', true)!.syncMs!.p50 : null,
      /** The price in mixing: syncs to consensus by region, and at random (N = 1,024, fixed H). */
      regional_consensus_syncs_n1024: regionalAt(1_024, 'fixed', true)?.consensusSyncs ?? null,
      random_consensus_syncs_n1024: regionalAt(1_024, 'fixed', false)?.consensusSyncs ?? null,
      regional_utilization_n10000_paced: regionalAt(10_000, 'paced', true)?.utilization ?? null,
      /** Of GROUP_SIZES, the one whose members reach consensus soonest (time, not syncs) at N = 1,024 with 5% churn. */
      fastest_consensus_group_size: fastestConsensus('fixed'),
      fastest_consensus_group_size_paced: fastestConsensus('paced'),
      utilization_n16: base16?.utilization ?? null,
    },
  }, null, 2)}\n`);
  console.log(`wrote ${file}`);
}

/**
 * Re-runs `opts.only` (the untrusted section) into the report at `file` and keeps the rest: the
 * top-level record names this run, and `sectionCommits` the commit each section was measured at.
 */
async function rerun(file: string, opts: BenchOptions): Promise<void> {
  const report = earlierReport(file, opts, RERUNNABLE);
  const t0 = Date.now();
  const earlier = { commit: report.commit ?? null, date: report.date ?? null };
  const sections: Record<string, { commit: string | null; date: string | null }> = report.sections ?? { everything: earlier };
  report.untrusted = await runUntrusted(opts.quick, UNTRUSTED_BASE);
  Object.assign(report, runRecord(t0, benchCommand('simulate', opts)));
  sections.untrusted = { commit: report.commit ?? null, date: report.date ?? null };
  report.sections = sections;
  report.summary = { ...report.summary, ...report.untrusted.summary };
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`re-ran ${opts.only!.join(', ')} in ${((Date.now() - t0) / 60_000).toFixed(1)} min; wrote ${file}`);
}
