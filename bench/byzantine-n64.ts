// The byzantine benchmark's N = 64 section (issue 37): an untrusted job of 64 LocalSGD members in
// robust Moshpit groups of 16 (a fresh random split every sync, each group's real centered-clip
// Group average), with 10% and 20% of the identities attacking by every attack (static and the
// adaptive slow drift) at full length over the seeds, and the clean run; its summary keys, the
// in-runner capture rate beside the rate random assignment gives, and what each figure is.
import type { Attack } from '@tabfleet/distributed';
import { GOALS, N64, ROBUST_RULE, WORKERS, n64Attackers, n64Cells, type CellSpec, type Plan } from './byzantine-config';
import { finished, settingOf, spread, worstOf, type Cell, type Setting, type Spread } from './byzantine-summary';

/** What runs one cell (the benchmark's pool, with its progress lines). */
export type RunCell = (spec: CellSpec) => Promise<Cell>;

export interface N64Section {
  plan: Plan['n64'] & { members: number; groupSize: number; attackers: Record<string, number>; H: number };
  settings: { clean: Setting; byShare: Record<string, Setting[]> };
  cells: Cell[];
  /** Group-syncs over the attacked cells of each share, and those the attackers held a strict majority in. */
  capture: Record<string, CaptureRate>;
  wallMs: number;
  /** CPU time of the cells (child processes), per cell and in all: what the section costs on an idle machine, divided by its processes. */
  cpu: { perCellMs: Spread | null; totalMs: number; processes: number };
  loadAverageAtStart: number[];
  loadAverageAtEnd: number[];
}

export interface CaptureRate {
  attackers: number;
  groupSyncs: number;
  captured: number;
  rate: number | null;
  /** P(more than half of a group of 16 are attackers) under random assignment: hypergeometric (exact for a random split), binomial (p = f/N). */
  hypergeometric: number;
  binomial: number;
  /** The largest share of `groupSyncs` random assignment exceeds with at most 5% chance (binomial quantile at the hypergeometric rate). */
  upper95: number;
}

const shareKey = (share: number) => `f${Math.round(share * 100)}`;

export async function runN64(p: Plan, runCell: RunCell, loadavg: () => number[]): Promise<N64Section> {
  const t0 = performance.now();
  const loadAverageAtStart = loadavg();
  const cells = await Promise.all(n64Cells(p).map(runCell));
  const of = (f: number, attack: Attack | null) => settingOf(cells.filter((c) => c.attackers === f && c.attack === attack));
  const byShare = Object.fromEntries(N64.attackerShares.map((share) => [shareKey(share), p.n64.attacks.map((a) => of(n64Attackers(share), a))]));
  const capture = Object.fromEntries(N64.attackerShares.map((share) => {
    const f = n64Attackers(share);
    return [shareKey(share), captureRate(finished(cells.filter((c) => c.attackers === f)), f)];
  }));
  return {
    plan: { ...p.n64, members: N64.members, groupSize: N64.groupSize, attackers: Object.fromEntries(N64.attackerShares.map((s) => [shareKey(s), n64Attackers(s)])), H: p.job.H },
    settings: { clean: of(0, null), byShare }, cells, capture, wallMs: performance.now() - t0, loadAverageAtStart, loadAverageAtEnd: loadavg(),
    cpu: { perCellMs: spread(finished(cells).map((c) => c.cpuMs)), totalMs: finished(cells).reduce((a, c) => a + c.cpuMs, 0), processes: p.processes },
  };
}

export function captureRate(cells: { groupSyncs?: number; attackerMajorityGroups?: number }[], attackers: number): CaptureRate {
  const groupSyncs = cells.reduce((a, c) => a + (c.groupSyncs ?? 0), 0);
  const captured = cells.reduce((a, c) => a + (c.attackerMajorityGroups ?? 0), 0);
  const g = N64.groupSize, n = N64.members, majority = Math.floor(g / 2) + 1;
  let hypergeometric = 0, binomial = 0;
  for (let k = majority; k <= Math.min(g, attackers); k++) hypergeometric += (choose(attackers, k) * choose(n - attackers, g - k)) / choose(n, g);
  const p = attackers / n;
  for (let k = majority; k <= g; k++) binomial += choose(g, k) * p ** k * (1 - p) ** (g - k);
  const upper95 = groupSyncs ? binomialQuantile(groupSyncs, hypergeometric, 0.95) / groupSyncs : 0;
  return { attackers, groupSyncs, captured, rate: groupSyncs ? captured / groupSyncs : null, hypergeometric, binomial, upper95 };
}

function choose(n: number, k: number): number {
  if (k < 0 || k > n) return 0;
  let r = 1;
  for (let i = 1; i <= k; i++) r = (r * (n - k + i)) / i;
  return r;
}

/** The smallest c with P(Bin(n, p) ≤ c) ≥ q. */
function binomialQuantile(n: number, p: number, q: number): number {
  let cdf = 0;
  for (let c = 0; c <= n; c++) {
    cdf += choose(n, c) * p ** c * (1 - p) ** (n - c);
    if (cdf >= q) return c;
  }
  return n;
}


/** The section's summary keys (joined to the benchmark's summary). */
export function summarizeN64(s: N64Section) {
  const clean = s.settings.clean.errors ? null : s.settings.clean.testAccuracy?.median ?? null;
  const w10 = worstOf(s.settings.byShare.f10), w20 = worstOf(s.settings.byShare.f20);
  const acc = (x: Setting | null) => (x && !x.errors ? x.testAccuracy?.median ?? null : null);
  const f10 = acc(w10), f20 = acc(w20);
  const goal = (points: number) => (clean === null ? null : clean - points / 100);
  const goals = { worst_accuracy_n64_f10: goal(GOALS.maxDropPointsN64F10), worst_accuracy_n64_f20: goal(GOALS.maxDropPointsN64F20) };
  const atLeast = (x: number | null, g: number | null) => x !== null && g !== null && x >= g;
  const byAttack = (settings: Setting[]) => Object.fromEntries(settings.map((x) => [x.attack!, acc(x)]));
  const capture = (c: CaptureRate) => ({ rate: c.rate, captured: c.captured, group_syncs: c.groupSyncs, hypergeometric: c.hypergeometric, binomial: c.binomial, upper95: c.upper95 });
  return {
    clean_accuracy_n64: clean,
    worst_accuracy_n64_f10: f10,
    worst_attack_n64_f10: w10?.attack ?? null,
    worst_accuracy_n64_f20: f20,
    worst_attack_n64_f20: w20?.attack ?? null,
    accuracy_n64_by_attack: { f10: byAttack(s.settings.byShare.f10), f20: byAttack(s.settings.byShare.f20) },
    group_capture_rate_runner: { f10: capture(s.capture.f10), f20: capture(s.capture.f20) },
    seed_spread_n64: { clean_accuracy_n64: s.settings.clean.testAccuracy, worst_accuracy_n64_f10: w10?.testAccuracy ?? null, worst_accuracy_n64_f20: w20?.testAccuracy ?? null },
    goals_n64: goals,
    goals_met_n64: {
      worst_accuracy_n64_f10: atLeast(f10, goals.worst_accuracy_n64_f10),
      worst_accuracy_n64_f20: atLeast(f20, goals.worst_accuracy_n64_f20),
      group_capture_rate_runner: Object.values(s.capture).every((c) => c.rate !== null && c.rate <= c.upper95),
    },
  };
}

/** What the section's figures are (the JSON's `definitions.n64`). */
export function definitionsN64(p: Plan) {
  const { attacks, seeds, syncs, evalExamples } = p.n64;
  const f = N64.attackerShares.map((share) => `${n64Attackers(share)} (${share * 100}% of ${N64.members}, rounded to the nearest member)`).join(' and ');
  return {
    cells: `${N64.members} in-process LocalSGD workers (CPU backend, one child process per cell) in robust Moshpit groups of ${N64.groupSize}: each sync a fresh ` +
      `random split (seeded by the cell's seed; sizes within one of each other), each group running the real Group average with ${ROBUST_RULE} on the members' ` +
      'parameters less the common start (so the norm screen compares how far each moved); every member adopts its group\'s result. The last f members attack ' +
      `(f = ${f}); an attacker sees only its own group (ALIE, IPM and slow-drift read that group's honest members). Evaluated at the end on worker 0 (honest), ` +
      `whose model is its last group's: ${evalExamples === null ? 'the whole test set and validation split' : `the first ${evalExamples} test images`}`,
    length: `full length = ${syncs} syncs of H = ${p.job.H} local steps: ${N64.members} × ${syncs} × ${p.job.H} steps of batch ${p.job.batchSize}, as many examples as an ` +
      `N = ${WORKERS} full cell (${WORKERS} × ${p.lengths.full.syncs} × ${p.job.H}); the same H, so each member's local work per sync is the job's. The price: ` +
      `${syncs} regroupings (and ${syncs} syncs for the slow drift to add up), where more syncs of fewer steps would change the job`,
    attacks: `every attack at full length (${attacks.join(', ')}), seeds ${seeds.join(', ')}; slow-drift is the adaptive one (attacks.ts): inside ` +
      'CenteredClip\'s radius every sync, along one direction fixed at its first sync',
    worst_accuracy_n64: `lowest, over every attack, of the median test accuracy over seeds; goals: clean_accuracy_n64 − ${GOALS.maxDropPointsN64F10} points at 10%, ` +
      `− ${GOALS.maxDropPointsN64F20} at 20% (set before the runs)`,
    group_capture_rate_runner: 'share of the attacked cells\' group-syncs in which the attackers held a strict majority (more than 8 of 16), per share; beside it ' +
      'the rate random assignment gives (hypergeometric: exact for a random split; binomial with p = f/N as the issue states it) and upper95, the share that ' +
      'random assignment exceeds with at most 5% chance over this many group-syncs. Assigned by the runner\'s seeded split, not the server (h-adaptive measures ' +
      'group_capture_rate through the real server)',
  };
}
