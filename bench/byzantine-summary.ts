// The byzantine benchmark's figures from its cells: cells of one setting over seeds, the choice of the
// worst attacks (on the validation split), the summary object with its goals, and what each means.
import type { Attack } from '@tabfleet/distributed';
import type { CellResult } from './byzantine-cell';
import { COLLAPSE_BELOW, GOALS, ROBUST_RULE, WORKERS, type CellSpec, type Plan } from './byzantine-config';
import { HEADLINE_LINK, type OverheadReport } from './byzantine-overhead';
import type { VerificationReport } from './byzantine-verification';
import { median } from './stats';

/** A cell as the JSON lists it: its spec, then its figures, or the error it ended with. */
export type Cell = CellSpec & { name: string } & ((Omit<CellResult, 'spec'> & { error: null }) | { error: string });
export type Finished = Extract<Cell, { error: null }>;

export const finished = (cells: Cell[]): Finished[] => cells.filter((c): c is Finished => c.error === null);

export interface Spread {
  median: number;
  min: number;
  max: number;
}

export function spread(xs: number[]): Spread | null {
  return xs.length ? { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) } : null;
}

/** One setting at full length over its seeds. */
export interface Setting {
  attackers: number;
  attack: Attack | null;
  rule: string;
  seeds: number[];
  testAccuracy: Spread | null;
  validationAccuracy: Spread | null;
  /** Seeds whose run collapsed, of those that finished. */
  collapsed: number;
  errors: number;
}

export function settingOf(cells: Cell[]): Setting {
  const ok = finished(cells);
  const { attackers, attack, rule } = cells[0];
  return {
    attackers, attack, rule, seeds: cells.map((c) => c.seed),
    testAccuracy: spread(ok.map((c) => c.testAccuracy)), validationAccuracy: spread(ok.map((c) => c.validationAccuracy)),
    collapsed: ok.filter((c) => c.collapsed).length, errors: cells.length - ok.length,
  };
}

/** The matrix at a glance: test accuracy by attacker count, attack and rule ('collapsed' below COLLAPSE_BELOW, 'error' for a failed cell). */
export function matrixTable(cells: Cell[]): Record<string, Record<string, Record<string, number | 'collapsed' | 'error'>>> {
  const table: ReturnType<typeof matrixTable> = {};
  for (const c of cells) {
    const row = ((table[`f=${c.attackers}`] ??= {})[c.attack ?? 'honest'] ??= {});
    row[c.rule] = c.error !== null ? 'error' : c.collapsed ? 'collapsed' : c.testAccuracy;
  }
  return table;
}

export interface WorstChoice {
  attackers: number;
  /** The attacks run at full length: the lowest validation accuracies of the short robust-rule cells. */
  chosen: Attack[];
  ranking: { attack: Attack; validationAccuracy: number }[];
}

export function chooseWorst(shortCells: Cell[], attackers: number, count: number): WorstChoice {
  const ranking = finished(shortCells)
    .filter((c) => c.attackers === attackers && c.rule === ROBUST_RULE && c.attack !== null)
    .map((c) => ({ attack: c.attack!, validationAccuracy: c.validationAccuracy }))
    .sort((a, b) => a.validationAccuracy - b.validationAccuracy);
  return { attackers, chosen: ranking.slice(0, count).map((r) => r.attack), ranking };
}

export interface SummaryCells {
  clean: Setting;
  meanScaledF1: Setting;
  worstF5: { choice: WorstChoice; settings: Setting[] };
  worstF7: { choice: WorstChoice; settings: Setting[] };
}

/** The setting with the lowest median test accuracy (a setting without one counts as the worst: nothing vouches for it). */
export function worstOf(settings: Setting[]): Setting | null {
  let worst: Setting | null = null;
  for (const s of settings) {
    if (!s.testAccuracy || s.errors) return s;
    if (!worst || s.testAccuracy.median < worst.testAccuracy!.median) worst = s;
  }
  return worst;
}

const ratio = (x: number | undefined) => x ?? null;

/** The summary, built here and only here; later figures join it as further keys. */
export function summarize(s: SummaryCells, overhead: OverheadReport, verification: VerificationReport) {
  const clean = s.clean.errors ? null : s.clean.testAccuracy?.median ?? null;
  const worst5 = worstOf(s.worstF5.settings), worst7 = worstOf(s.worstF7.settings);
  const acc = (x: Setting | null) => (x && !x.errors ? x.testAccuracy?.median ?? null : null);
  const f5 = acc(worst5), f7 = acc(worst7);
  const scaled = s.meanScaledF1;
  const headline = overhead.links[HEADLINE_LINK];
  const goals = {
    worst_robust_accuracy_f5: clean === null ? null : clean - GOALS.maxDropPointsF5 / 100,
    worst_robust_accuracy_f7: clean === null ? null : clean - GOALS.maxDropPointsF7 / 100,
    mean_accuracy_scaled_f1: COLLAPSE_BELOW,
    honest_overhead_bytes: GOALS.maxOverheadBytes,
    honest_overhead_time: GOALS.maxOverheadTime,
    owner_lie_caught_rounds: GOALS.maxOwnerLieRounds,
    recompute_false_positive_rate: 0,
  };
  const { ownerLie, recompute } = verification;
  const atLeast = (x: number | null, goal: number | null) => x !== null && goal !== null && x >= goal;
  return {
    clean_accuracy: clean,
    worst_robust_accuracy_f5: f5,
    worst_attack_f5: worst5?.attack ?? null,
    worst_robust_accuracy_f7: f7,
    worst_attack_f7: worst7?.attack ?? null,
    mean_accuracy_scaled_f1: scaled.errors ? null : scaled.testAccuracy?.median ?? null,
    mean_scaled_f1_collapsed_seeds: `${scaled.collapsed}/${scaled.seeds.length}`,
    honest_overhead_bytes: ratio(headline?.bytesRatio),
    honest_overhead_time: ratio(headline?.timeRatio),
    honest_overhead_time_by_link: Object.fromEntries(Object.entries(overhead.links).map(([name, l]) => [name, l.timeRatio])),
    /** The group average alone (without validation) ÷ ring allreduce. */
    average_only_overhead_bytes: ratio(headline?.averageOnlyBytesRatio),
    average_only_overhead_time: ratio(headline?.averageOnlyTimeRatio),
    owner_lie_caught_rounds: ownerLie.medianRounds,
    owner_lie_trials: `${ownerLie.trials - ownerLie.notCaught}/${ownerLie.trials} caught, ${ownerLie.honestRemoved} honest members removed`,
    recompute_false_positive_rate: recompute.falsePositiveRate,
    recompute_honest_pairs: recompute.units,
    /** Min and max over the seeds of the settings behind the accuracy figures above. */
    seed_spread: {
      clean_accuracy: s.clean.testAccuracy,
      worst_robust_accuracy_f5: worst5?.testAccuracy ?? null,
      worst_robust_accuracy_f7: worst7?.testAccuracy ?? null,
      mean_accuracy_scaled_f1: scaled.testAccuracy,
    },
    goals,
    goals_met: {
      worst_robust_accuracy_f5: atLeast(f5, goals.worst_robust_accuracy_f5),
      worst_robust_accuracy_f7: atLeast(f7, goals.worst_robust_accuracy_f7),
      // It must collapse: every seed.
      mean_accuracy_scaled_f1: !scaled.errors && scaled.seeds.length > 0 && scaled.collapsed === scaled.seeds.length,
      honest_overhead_bytes: headline !== undefined && headline.bytesRatio <= goals.honest_overhead_bytes,
      honest_overhead_time: headline !== undefined && headline.timeRatio <= goals.honest_overhead_time,
      owner_lie_caught_rounds: ownerLie.notCaught === 0 && ownerLie.medianRounds <= goals.owner_lie_caught_rounds,
      recompute_false_positive_rate: recompute.falsePositives === 0 && recompute.faultyRefused === recompute.units,
    },
  };
}

/** What every figure is, and which cells ran how long (the JSON's `definitions`). */
export function definitions(p: Plan) {
  const { short, full } = p.lengths;
  const steps = (syncs: number) => `${syncs} sync${syncs === 1 ? '' : 's'} of H = ${p.job.H} local steps (${syncs * p.job.H} steps per worker)`;
  const examples = (n: number | null) => (n === null ? 'the whole 10,000-image test set and the whole validation split' : `the first ${n} test images and the first ${n} validation examples`);
  return {
    cells: `one training run of ${WORKERS} in-process workers (CPU backend) from a common start, the last f of them attacking; evaluated once at the end on worker 0 ` +
      `(honest; every member holds the same parameters after a sync)`,
    short: `every matrix cell (attackers ${p.matrix.attackerCounts.join(', ')} × ${p.matrix.attacks.length} attacks × rules ${p.matrix.rules.join(', ')}; f = 0 once ` +
      `per rule), seed ${p.matrix.seed}: ${steps(short.syncs)}, evaluated on ${examples(short.evalExamples)}`,
    full: `the summary's cells, seeds ${p.seeds.join(', ')}: ${steps(full.syncs)}, evaluated on ${examples(full.evalExamples)}; the clean run (f = 0, ` +
      `${ROBUST_RULE}), the ${p.worstAttacksAtFullLength} worst attack(s) at f = 5 and at f = 7 with ${ROBUST_RULE} (worstAttacks), and the plain mean with one scaled attacker`,
    rules: `'mean' is plain ring allreduce (no screening); the other rules average in a group: each part's owner screens the contributions (non-finite values, norm ` +
      `above 10 × the round's median) and combines the rest with the rule`,
    attackers: 'attack only what they contribute: as part owners they combine honestly (an owner that lies about its aggregate is for the validators to catch); ' +
      'label-flip attackers train on flipped labels and send honest-looking deltas, the others train honestly and replace what they send (attacks.ts)',
    worstAttacks: `the attacks whose short ${ROBUST_RULE} cell at that f ended with the lowest validation accuracy (held-out training examples; the test set plays no part in the choice)`,
    testAccuracy: 'accuracy on the test images named by the cell\'s length; a setting reports the median, min and max over its seeds',
    collapsed: `test loss not finite, or test accuracy below ${COLLAPSE_BELOW}: under half of the honest run's (chance is 0.1)`,
    refused: 'contributions the group\'s owners refused while screening, summed over syncs and parts, split by sender: attackers (correctly) or honest members (false alarms)',
    clean_accuracy: `median over seeds of the full-length clean run's test accuracy (f = 0, ${ROBUST_RULE})`,
    worst_robust_accuracy_f5: `lowest, over the attacks run at full length at f = 5 with ${ROBUST_RULE}, of their median test accuracy over seeds; goal: ` +
      `clean_accuracy − ${GOALS.maxDropPointsF5} points`,
    worst_robust_accuracy_f7: `the same at f = 7; goal: clean_accuracy − ${GOALS.maxDropPointsF7} points`,
    mean_accuracy_scaled_f1: `median over seeds of the test accuracy of plain ring mean with one attacker sending ×100 its delta; goal: every seed collapses (below ` +
      `${COLLAPSE_BELOW}), which shows the test has teeth`,
    honest_overhead_bytes: `bytes one member sends per honest sync (collective counters, frame headers included), group (${ROBUST_RULE}) average plus the validation ` +
      `of the parts the server draws (≈ 21%, mean over reps) ÷ ring allreduce, same payloads (overhead); average_only_overhead_bytes leaves the validation out`,
    honest_overhead_time: `exchange wall time per honest sync, group average + one server round trip + validation ÷ ring, medians over reps, on the ${HEADLINE_LINK} ` +
      `link model (overhead.links; the other link models are in honest_overhead_time_by_link). All ${WORKERS} members run in one thread, so the group's screening, ` +
      `combining and digests of every member add up here where real members do theirs at once: an upper bound on the group's time, and one that other load on the ` +
      `machine inflates (overhead.loadAverageAtStart)`,
    owner_lie_caught_rounds: `median over trials (verification.ownerLie) of the group rounds an owner that sends everyone the same wrong aggregate (and reports it ` +
      `consistently) took part in until the server removed it, the round it was caught in included: a real server, ${WORKERS} simulated members that follow the ` +
      `protocol without model math, every member new, so on probation, and every part of a probationer is checked (server/src/coordinator/validation-draw.ts); goal ≤ ${GOALS.maxOwnerLieRounds}`,
    recompute_false_positive_rate: 'share of honest replica pairs the server\'s tolerance (protocol REPLICA_TOLERANCE) would refuse: the same LocalSGD units (H steps ' +
      'of the job\'s batch size, fresh optimizer, seeded batches) trained on SwiftShader WebGPU and on the CPU reference in one Chromium page ' +
      '(verification.recompute); goal 0, with every result 1.5× too long refused',
  };
}
