// What the byzantine benchmark runs: the job (16 LocalSGD workers of the Fashion-MNIST MLP), the
// matrix of attacker counts × attacks × rules, how long short and full-length cells train, the seeds,
// and the goals of the issue.
import { ATTACKS, STATIC_ATTACKS, type Attack } from '@tabfleet/distributed';
import type { OptimizerConfig } from '@tabfleet/nn';
import { AGGREGATIONS, type Aggregation } from '@tabfleet/protocol';

/** Members of the job, all in one process; the attackers are the last ones. */
export const WORKERS = 16;
/**
 * A run whose test accuracy ends below this (chance is 10%), or whose test loss is not finite, has
 * collapsed. The line as first set, before any run: it was moved to 0.4 after the plain mean with one
 * ×100 attacker ended at 20.3–29.0% over 3 seeds, and is back at 0.2 (issue 37): the goal is reported
 * as it falls.
 */
export const COLLAPSE_BELOW = 0.2;

export const isCollapsed = (r: { testAccuracy: number; testLoss: number | null }) => !Number.isFinite(r.testLoss) || r.testAccuracy < COLLAPSE_BELOW;
/** The rule of untrusted jobs, which the summary's robust figures and the overhead measure. */
export const ROBUST_RULE: Aggregation = 'centered-clip';

/**
 * The issue's goals: accuracy drops in points below the clean run, overheads as group ÷ ring. Set
 * before any run (the N = 64 ones too: issue 37), never moved after.
 */
export const GOALS = { maxDropPointsF5: 2, maxDropPointsF7: 5, maxOverheadBytes: 1.1, maxOverheadTime: 1.3, maxOwnerLieRounds: 3, maxDropPointsN64F10: 2, maxDropPointsN64F20: 5 };

/**
 * The N = 64 section: an untrusted job of 64 members in robust Moshpit groups of 16 (a fresh random
 * split every sync), attackers 10% and 20% of the identities, rounded to the nearest member.
 */
export const N64 = { members: 64, groupSize: 16, attackerShares: [0.1, 0.2] } as const;
export const n64Attackers = (share: number) => Math.round(share * N64.members);

export interface JobSettings {
  H: number;
  batchSize: number;
  /** Of the local steps. */
  optimizer: OptimizerConfig;
  /** The last this many training examples are held out: never trained on, what the worst attacks are chosen on. */
  validationExamples: number;
}

export type CellLength = 'short' | 'full';

/** One training run. `attack` is null for the honest case (attackers 0). */
export interface CellSpec {
  length: CellLength;
  attackers: number;
  attack: Attack | null;
  /** 'mean' is the ring's allreduce; the other rules average in a group. */
  rule: Aggregation;
  /** Members of the job (absent: WORKERS); with `groupSize`, robust Moshpit groups drawn at random every sync. */
  members?: number;
  groupSize?: number;
  seed: number;
  syncs: number;
  /** Examples of the test set and of the validation split evaluated at the end (null: all of them). */
  evalExamples: number | null;
}

export const cellName = (c: CellSpec) => `${c.length}${c.members ? ` n=${c.members}/${c.groupSize}` : ''} f=${c.attackers} ${c.attack ?? 'honest'} ${c.rule} seed ${c.seed}`;

export interface Plan {
  quick: boolean;
  job: JobSettings;
  lengths: Record<CellLength, { syncs: number; evalExamples: number | null }>;
  matrix: { attackerCounts: number[]; attacks: Attack[]; rules: Aggregation[]; seed: number };
  /** Seeds of every full-length cell. */
  seeds: number[];
  /** How many of the attacks the short matrix found worst at f = 5 and at f = 7 run at full length. */
  worstAttacksAtFullLength: number;
  /**
   * The N = 64 section: its attacks (every one at full length), seeds, and length. Full length trains
   * on as many examples as an N = 16 full cell: the same H, ⌈16 × its syncs / 64⌉ syncs.
   */
  n64: { attacks: Attack[]; seeds: number[]; syncs: number; evalExamples: number | null };
  /** Child processes that run cells side by side. */
  processes: number;
  /** The link models the overhead is measured on (byzantine-overhead.ts LINK_MODELS). */
  linkModels: string[];
}

export function plan(quick: boolean, job: JobSettings, cores: number): Plan {
  const lengths: Plan['lengths'] = quick
    ? { short: { syncs: 1, evalExamples: 500 }, full: { syncs: 2, evalExamples: 1000 } }
    : { short: { syncs: 1, evalExamples: 2000 }, full: { syncs: 12, evalExamples: null } };
  return {
    quick, job, lengths,
    matrix: quick
      // The two attacks whose outcome is certain (screened by a group, ruinous to a mean), and the f the summary needs.
      ? { attackerCounts: [0, 5, 7], attacks: ['scaled', 'non-finite'], rules: ['mean', ROBUST_RULE], seed: 1 }
      : { attackerCounts: [0, 1, 3, 5, 7], attacks: [...STATIC_ATTACKS], rules: [...AGGREGATIONS], seed: 1 },
    seeds: quick ? [1] : [1, 2, 3],
    // 3: at f = 7 the short cells of the second to fourth worst attacks lay within 0.2 points of each other.
    worstAttacksAtFullLength: quick ? 1 : 3,
    n64: quick
      ? { attacks: ['slow-drift'], seeds: [1], syncs: 1, evalExamples: 500 }
      : { attacks: [...ATTACKS], seeds: [1, 2, 3], syncs: Math.ceil((WORKERS * lengths.full.syncs) / N64.members), evalExamples: null },
    processes: Math.max(1, Math.min(2, cores)),
    linkModels: quick ? ['unlimited', 'capped_uplink'] : ['unlimited', 'capped_link', 'capped_uplink'],
  };
}

/** The short matrix: every attack × rule at each attacker count, the honest case once per rule. */
export function matrixCells(p: Plan): CellSpec[] {
  const { attackerCounts, attacks, rules, seed } = p.matrix;
  const cell = (attackers: number, attack: Attack | null, rule: Aggregation): CellSpec => ({ length: 'short', attackers, attack, rule, seed, ...p.lengths.short });
  return attackerCounts.flatMap((f) => (f === 0 ? rules.map((rule) => cell(0, null, rule)) : attacks.flatMap((attack) => rules.map((rule) => cell(f, attack, rule)))));
}

/** Full-length cells of one setting, one per seed. */
export function fullCells(p: Plan, attackers: number, attack: Attack | null, rule: Aggregation): CellSpec[] {
  return p.seeds.map((seed) => ({ length: 'full', attackers, attack, rule, seed, ...p.lengths.full }));
}

/**
 * The N = 64 section's cells (centered clip): the clean run and every attack at 20% and 10%, seed by
 * seed, so that a run cut short has every setting at its first seeds.
 */
export function n64Cells(p: Plan): CellSpec[] {
  const { attacks, seeds, syncs, evalExamples } = p.n64;
  const cell = (attackers: number, attack: Attack | null, seed: number): CellSpec => ({
    length: 'full', attackers, attack, rule: ROBUST_RULE, seed, syncs, evalExamples, members: N64.members, groupSize: N64.groupSize,
  });
  const shares = [...N64.attackerShares].reverse();
  const settings: [number, Attack | null][] = [[0, null], ...shares.flatMap((share) => attacks.map((a): [number, Attack] => [n64Attackers(share), a]))];
  return seeds.flatMap((seed) => settings.map(([f, a]) => cell(f, a, seed)));
}
