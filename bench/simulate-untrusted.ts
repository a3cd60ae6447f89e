// Untrusted jobs at scale (issue 37), a section of `npm run simulate`: the simulator's untrusted Moshpit
// jobs (simulator.ts `attackers`): the real coordinator draws each sync's random groups of 16 and checks
// each one (digests, validators, disputes settled by its own recomputation, refusals, evictions); the
// members average, report, validate and give evidence as simulated-group.ts computes them with the
// runtime's rules. N = 10,000, 5% churn per 10 minutes, 10% of the members attackers, a third each
// scaling what they send by 1e6, flipping its sign, and lying as owners (a negated aggregate with
// digests that agree). Paced, as the trusted headline's utilization (fixed H = 8 is capped by the
// links), 10 simulated minutes (the churn's unit, as the trusted N = 10,000 runs; some 12 syncs: a
// group that catches a liar runs again, and the paced budget follows the slowest group's exchange), seeds
// 1–3, each in a child process of its own. Goals (issue 37, set before the runs): utilization ≥ 0.8,
// and syncs until the honest members agree ≤ 19 (2·log2(N / 16) = 18.6, the trusted goal's bound).
import { fileURLToPath } from 'node:url';
import { ChildPool } from './child-pool';
import { ATTACKS } from './simulated-group';
import type { Scenario, ScenarioResult } from './simulator';
import { median, spread } from './stats';

export const UNTRUSTED_ATTACKERS = { share: 0.1, kinds: ATTACKS };
export const UNTRUSTED_GOALS = { utilization: 0.8, consensusSyncs: 19 };
const SEEDS = [1, 2, 3];
const CHILD = fileURLToPath(new URL('./simulate-child.ts', import.meta.url));

/** The base of every scenario (simulate.ts's links, steps and paced H). */
export type ScenarioBase = Pick<Scenario, 'stepMs' | 'stepSigma' | 'bandwidthBytesPerSec' | 'latencyMs'> & { pacedH: number };

/** Full: N = 10,000 paced for 10 minutes, one per seed. Quick: N = 64, fixed H = 8, 2 minutes, seed 1. */
export function untrustedScenarios(quick: boolean, base: ScenarioBase): Scenario[] {
  const { pacedH, ...rest } = base;
  const run = quick ? { members: 64, pacing: 'fixed' as const, H: 8, durationMs: 120_000 } : { members: 10_000, pacing: 'paced' as const, H: pacedH, durationMs: 600_000 };
  return (quick ? [1] : SEEDS).map((seed) => ({ ...rest, ...run, seed, churnPer10Min: 0.05, groupSize: 16, attackers: UNTRUSTED_ATTACKERS }));
}

/** One run's figures, as the summary keys name them. */
function figuresOf(r: ScenarioResult) {
  const u = r.untrusted!;
  return {
    utilization: r.utilization, honestUtilization: u.honestUtilization, consensusSyncs: r.consensusSyncs, syncs: r.syncs,
    honestEvicted: u.evicted.honest, attackersEvicted: u.evicted.byAttack, groupsFailed: u.counters.groups_failed, groupsCommitted: u.counters.groups_committed,
  };
}

export interface UntrustedSection {
  definition: string;
  goals: typeof UNTRUSTED_GOALS;
  results: ScenarioResult[];
  perSeed: ReturnType<typeof figuresOf>[];
  spreads: Record<string, ReturnType<typeof spread>>;
  /** The summary's keys (N = 10,000; null in a quick run, whose N is 64). */
  summary: Record<string, number | null>;
}

export async function runUntrusted(quick: boolean, base: ScenarioBase, log: (line: string) => void = console.log): Promise<UntrustedSection> {
  const scenarios = untrustedScenarios(quick, base);
  // The seeds are independent runs: side by side (on fewer cores they share them; simulated time does not care).
  const pool = new ChildPool<Scenario, ScenarioResult>(CHILD, scenarios.length);
  let results: ScenarioResult[];
  try {
    results = await Promise.all(scenarios.map((s) => pool.run(s)));
  } finally {
    pool.close();
  }
  for (const r of results) {
    const s = r.scenario, u = r.untrusted;
    log(`untrusted N=${s.members} seed ${s.seed}, ${s.pacing}: ${r.refused ?? `${r.syncs} syncs, utilization ${r.utilization.toFixed(3)} (honest ${u!.honestUtilization.toFixed(3)}), ` +
      `honest consensus in ${r.consensusSyncs ?? '-'} syncs, evicted: ${u!.evicted.honest} honest, ${JSON.stringify(u!.evicted.byAttack)}; ${JSON.stringify(u!.counters)} ` +
      `(${(r.wallMs / 1000).toFixed(0)} s wall)`}`);
  }
  const perSeed = results.filter((r) => r.untrusted).map(figuresOf);
  const numeric = (k: 'utilization' | 'honestUtilization' | 'consensusSyncs' | 'honestEvicted') => perSeed.map((f) => f[k]);
  const complete = (xs: (number | null)[]): xs is number[] => xs.length === results.length && xs.every((x) => x !== null);
  const spreads = Object.fromEntries((['utilization', 'honestUtilization', 'consensusSyncs', 'honestEvicted'] as const).map((k) => {
    const xs = numeric(k);
    return [k, complete(xs) ? spread(xs) : null];
  }));
  const at10k = !quick;
  const medianOf = (k: 'utilization' | 'honestUtilization' | 'consensusSyncs' | 'honestEvicted') => {
    const xs = numeric(k);
    return at10k && complete(xs) ? median(xs) : null;
  };
  return {
    definition: `N = ${untrustedScenarios(quick, base)[0].members}, trust untrusted: random groups of 16 drawn and checked by the real coordinator, 5% churn per 10 ` +
      `minutes, ${UNTRUSTED_ATTACKERS.share * 100}% of the members attackers (${UNTRUSTED_ATTACKERS.kinds.join(', ')} in turn; an evicted one rejoins under a fresh identity ` +
      `1 s later), ${quick ? 'fixed H = 8' : `paced (nominal H ${base.pacedH})`}, seeds ${quick ? 1 : SEEDS.join(', ')} (the groups are the server's own randomness, not the ` +
      'seed\'s); the checks run on a stand-in model of 1,672 f32 parameters (each member\'s drawn at random), the links carry mlp-fashion\'s 814 KB; consensus: syncs ' +
      'until every honest member is within 1% of the honest members\' mean (attackers\' vectors left out)',
    goals: UNTRUSTED_GOALS, results, perSeed, spreads,
    summary: {
      untrusted_utilization_n10000: medianOf('utilization'),
      untrusted_consensus_rounds_n10000: medianOf('consensusSyncs'),
      untrusted_honest_utilization_n10000: medianOf('honestUtilization'),
      untrusted_honest_evicted_n10000: medianOf('honestEvicted'),
    },
  };
}
