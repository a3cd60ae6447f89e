// `npm run bench -- byzantine`: 16 LocalSGD workers of the Fashion-MNIST MLP (CPU backend, one
// process per cell) with f = 0, 1, 3, 5, 7 of them attacking, for every attack (attacks.ts) and rule
// (plain ring mean; group averaging by centered clip, trimmed mean, median). Three sections:
//   matrix    every cell short (few syncs, one seed);
//   summary   at full length with 3 seeds: the clean run, the worst attacks at f = 5 and 7 with
//             centered clip (chosen from the matrix on the validation split), the mean with one ×100
//             attacker;
//   overhead  the honest case: bytes and exchange time of group averaging (with validation) ÷ ring
//             allreduce;
//   verification  rounds until validators catch a lying owner (real server, simulated members), and
//             redundant recompute's false positives between WebGPU and the CPU reference.
// `--only overhead,verification` re-runs those into the existing JSON (the matrix takes ~35 minutes);
// `--only robust` re-runs what depends on centered clip's constants: its matrix cells, the worst
// attacks they choose and the clean run at full length (the other rules' cells and the plain mean's
// summary setting are deterministic and stay). `--only n64` runs the N = 64 section (byzantine-n64.ts:
// 64 members in robust groups of 16, every attack at 10% and 20% at full length) into the JSON;
// `--only capture` the group capture rate of rejoining Sybils through the real server
// (byzantine-capture.ts), `--only dgc` DGC against dense deltas under CenteredClip (byzantine-dgc.ts).
// Cells run in child processes side by side (bench/child-pool.ts). Writes
// bench/results/byzantine.json, whose `definitions` say what each figure is and which cells ran how.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Attack } from '@tabfleet/distributed';
import { fashionMnistFromDisk } from '@tabfleet/distributed/node';
import { repoRoot } from '@tabfleet/headless';
import type { Aggregation } from '@tabfleet/protocol';
import { ROBUST_RULE, WORKERS, cellName, isCollapsed, fullCells, matrixCells, n64Cells, plan, type CellSpec, type JobSettings, type Plan } from './byzantine-config';
import { definitionsN64, runN64, summarizeN64, type N64Section } from './byzantine-n64';
import { measureGroupCapture, type CaptureResult } from './byzantine-capture';
import { measureDgcRobust, type DgcRobustReport } from './byzantine-dgc';
import { measureOverhead, type OverheadReport } from './byzantine-overhead';
import { measureVerification } from './byzantine-verification';
import type { CellResult } from './byzantine-cell';
import type { CellTask } from './byzantine-child';
import { ChildPool } from './child-pool';
import { chooseWorst, definitions, matrixTable, settingOf, spread, summarize, type Cell, type Finished, type SummaryCells } from './byzantine-summary';
import { VALIDATION_EXAMPLES, VARIANTS, baseSettings, convergenceConfig, variantName } from './convergence-config';
import { benchCommand, commitOf, earlierReport, runRecord } from './machine';
import type { BenchOptions } from './run';
import { tuningFile, type TuningReport } from './tune';

const STRATEGY_CHOICE = 'LocalSGD with the convergence benchmark\'s settings, not measured against DiLoCo under attack here: a second strategy would double a matrix ' +
  'that already takes most of the 60-minute budget on 2 cores. LocalSGD suits robust rules: a sync adopts the rule\'s combination of the members\' parameter deltas ' +
  'and carries nothing into the next, whereas DiLoCo\'s outer Nesterov momentum (0.9) would carry whatever an attacker moves past the rule into the following syncs.';
/** Quick mode's local steps per sync: a smoke test that finishes in a minute or two. */
const QUICK_H = 2;
/** Pool priorities: the cells that choose the worst attacks first, then the long runs, the other short cells last. */
const PRIORITY = { choosesWorst: 3, full: 2, short: 1 };
const CHILD = fileURLToPath(new URL('./byzantine-child.ts', import.meta.url));

/** Cells of one job in child processes. */
class CellPool {
  private readonly pool: ChildPool<CellTask, CellResult>;
  constructor(size: number, private readonly job: JobSettings) {
    this.pool = new ChildPool(CHILD, size);
  }
  run(spec: CellSpec, priority: number): Promise<CellResult> {
    return this.pool.run({ spec, job: this.job }, priority);
  }
  close(): void {
    this.pool.close();
  }
}

/** LocalSGD's settings from tuning.json (chosen on the validation split), or the starting ones in quick mode. */
export function jobSettings(quick: boolean): { job: JobSettings; from: string } {
  const variant = VARIANTS.find((v) => v.strategy === 'localsgd' && v.compression === 'none')!;
  let settings = baseSettings(variant);
  let from = 'the starting settings of bench/convergence-config.ts (quick mode: untuned)';
  if (!quick) {
    const file = tuningFile(false);
    if (!existsSync(file)) throw new Error(`${relative(process.cwd(), file)} is missing: run \`npm run bench -- tune\` first`);
    const report = JSON.parse(readFileSync(file, 'utf8')) as TuningReport;
    const tuned = report.variants.find((v) => v.variant === variantName(variant));
    if (report.quick || !tuned) throw new Error(`${file} is not a full tuning run with ${variantName(variant)}`);
    settings = tuned.chosen;
    from = `${relative(repoRoot, file)} of ${report.date}: chosen for 4 workers on the validation split, not retuned for ${WORKERS}`;
  }
  const cfg = convergenceConfig(variant, quick, false, 1, settings);
  return { job: { H: quick ? QUICK_H : cfg.H, batchSize: cfg.batchSize, optimizer: cfg.optimizer, validationExamples: VALIDATION_EXAMPLES }, from };
}

/** Progress lines with the elapsed time, and every cell's wall time by length. */
class Progress {
  done = 0;
  /** By length; the N = 64 section's cells apart. */
  readonly wallMs: Record<CellSpec['length'] | 'n64', number[]> = { short: [], full: [], n64: [] };
  constructor(private readonly total: number, private readonly log: (line: string) => void) {}

  finished(c: Cell): void {
    this.done++;
    if (c.error !== null) {
      this.log(`[${this.done}/${this.total}] ${c.name}: FAILED ${c.error.split('\n')[0]}`);
      return;
    }
    this.wallMs[c.members ? 'n64' : c.length].push(c.wallMs);
    const pct = (x: number) => `${(100 * x).toFixed(2)}%`;
    this.log(`[${this.done}/${this.total}] ${c.name}: test ${pct(c.testAccuracy)}, validation ${pct(c.validationAccuracy)}${c.collapsed ? ' (collapsed)' : ''}, ` +
      `refused ${c.refused.attackers}+${c.refused.honest}, ${(c.wallMs / 1000).toFixed(1)} s (CPU ${(c.cpuMs / 1000).toFixed(1)} s)` +
      `${c.groupSyncs ? `, attacker majority in ${c.attackerMajorityGroups}/${c.groupSyncs} group-syncs` : ''}`);
  }
}

/** Runs one cell; a cell that throws is recorded with its error rather than ending the benchmark. */
async function runCell(pool: CellPool, spec: CellSpec, priority: number, progress: Progress): Promise<Cell> {
  const name = cellName(spec);
  let cell: Cell;
  try {
    const { spec: _spec, ...result } = await pool.run(spec, priority);
    cell = { name, ...spec, ...result, error: null };
  } catch (e) {
    cell = { name, ...spec, error: (e as Error).message };
  }
  progress.finished(cell);
  return cell;
}

/** The short matrix; `robustAt(f)` resolves once the centered-clip cells at f are done (they choose the worst attacks). */
function runMatrix(pool: CellPool, p: Plan, progress: Progress): { cells: Promise<Cell[]>; robustAt: (f: number) => Promise<Cell[]> } {
  const specs = matrixCells(p);
  const choosesWorst = (s: CellSpec) => (s.attackers === 5 || s.attackers === 7) && s.rule === ROBUST_RULE;
  const running = specs.map((s) => ({ spec: s, cell: runCell(pool, s, choosesWorst(s) ? PRIORITY.choosesWorst : PRIORITY.short, progress) }));
  return {
    cells: Promise.all(running.map((r) => r.cell)),
    robustAt: (f) => Promise.all(running.filter((r) => r.spec.attackers === f && r.spec.rule === ROBUST_RULE).map((r) => r.cell)),
  };
}

/** The summary's full-length settings over their seeds; the worst attacks wait for the matrix cells that choose them. */
async function runSummaryCells(pool: CellPool, p: Plan, matrix: ReturnType<typeof runMatrix>, progress: Progress): Promise<{ settings: SummaryCells; cells: Cell[] }> {
  const cells: Cell[] = [];
  const setting = async (attackers: number, attack: Attack | null, rule: Aggregation) => {
    const runs = await Promise.all(fullCells(p, attackers, attack, rule).map((s) => runCell(pool, s, PRIORITY.full, progress)));
    cells.push(...runs);
    return settingOf(runs);
  };
  const worst = async (f: number) => {
    const choice = chooseWorst(await matrix.robustAt(f), f, p.worstAttacksAtFullLength);
    return { choice, settings: await Promise.all(choice.chosen.map((a) => setting(f, a, ROBUST_RULE))) };
  };
  const [clean, meanScaledF1, worstF5, worstF7] = await Promise.all([setting(0, null, ROBUST_RULE), setting(1, 'scaled', 'mean'), worst(5), worst(7)]);
  return { settings: { clean, meanScaledF1, worstF5, worstF7 }, cells };
}

/** The honest case's overhead, measured in this process before any cell starts (nothing else computes meanwhile). */
async function runOverhead(p: Plan, reps: number, log: (line: string) => void): Promise<OverheadReport & { wallMs: number; loadAverageAtStart: number[]; loadAverageAtEnd: number[] }> {
  const t0 = performance.now();
  const loadAverageAtStart = os.loadavg();
  const report = await measureOverhead(await fashionMnistFromDisk(), p.job, p.linkModels, reps, log);
  // Every member runs in this thread, so other work on the machine slows the group's exchanges most.
  return { ...report, wallMs: performance.now() - t0, loadAverageAtStart, loadAverageAtEnd: os.loadavg() };
}

/** Sections that can be re-run on their own into an existing report. */
const RERUNNABLE = ['robust', 'overhead', 'verification', 'n64', 'capture', 'dgc'];

/**
 * Sybils that rejoin under fresh identities and addresses, through the real server (byzantine-capture.ts):
 * N = 64 with 20% attackers in groups of 16, 300 syncs (quick: 16 members, 30 syncs).
 */
function runCapture(quick: boolean, log: (line: string) => void): Promise<CaptureResult> {
  return measureGroupCapture(quick ? { members: 16, attackerShare: 0.2, groupSize: 8, syncs: 30, log } : { members: 64, attackerShare: 0.2, groupSize: 16, syncs: 300, log });
}

/** DGC against dense deltas under CenteredClip in one group of 16, no attackers (byzantine-dgc.ts). */
function runDgc(quick: boolean, p: Plan, log: (line: string) => void): Promise<DgcRobustReport> {
  return measureDgcRobust({ quick, job: p.job, processes: p.processes, log });
}

/** The N = 64 section's cells in `pool` (full-length priority). */
function runN64Section(pool: CellPool, p: Plan, progress: Progress): Promise<N64Section> {
  return runN64(p, (spec) => runCell(pool, spec, PRIORITY.full, progress), () => os.loadavg());
}

/** The summary: the N = 16 figures, then the N = 64 section's, the capture's and DGC's keys where the report has them. */
const fullSummary = (cells: SummaryCells, overhead: OverheadReport, verification: Parameters<typeof summarize>[2], n64: N64Section | undefined,
  capture: CaptureResult | undefined, dgc: DgcRobustReport | undefined) => ({
  ...summarize(cells, overhead, verification), ...(n64 ? summarizeN64(n64) : {}),
  ...(capture ? {
    group_capture_rate: capture.rate, group_capture_rate_random: capture.randomRate, group_capture_rate_random_ci95: capture.ci95,
    group_capture_rate_binomial: capture.binomialRate, group_capture_rate_within_random: capture.withinRandom,
  } : {}),
  ...(dgc ? { dgc_robust_accuracy_drop_pts: dgc.dgc_robust_accuracy_drop_pts, dgc_robust_accuracy_drop_goal_met: dgc.met, dgc_robust_sparsity: dgc.sparsity } : {}),
  ...(dgc?.validation ? { dgc_validation_chosen_sparsity: dgc.validation.chosen } : {}),
  ...(dgc?.longer ? { [`dgc_robust_accuracy_drop_pts_${dgc.longer.syncs}_syncs`]: dgc.longer.dgc_robust_accuracy_drop_pts } : {}),
});

export async function run(opts: BenchOptions): Promise<void> {
  const file = opts.out ?? join(repoRoot, 'bench', 'results', opts.quick ? 'byzantine.quick.json' : 'byzantine.json');
  if (opts.only) return rerun(file, opts);
  return runAll(file, opts);
}

/** Re-runs `opts.only` into the report at `file`, keeps the rest, and recomputes the summary. */
async function rerun(file: string, opts: BenchOptions): Promise<void> {
  const report = earlierReport(file, opts, RERUNNABLE);
  const t0 = Date.now();
  const log = (line: string) => console.log(`[byzantine] ${line}`);
  const { job } = jobSettings(opts.quick);
  const p = plan(opts.quick, job, os.cpus().length);
  const sections: Record<string, string> = report.sectionDates ?? { matrix: report.date, summaryCells: report.date, overhead: report.date };
  // The top-level record names this (partial) run; each section keeps the commit that measured it.
  const commits: Record<string, string | null> = report.sectionCommits ?? Object.fromEntries(Object.keys(sections).map((k) => [k, report.commit ?? null]));
  for (const s of opts.only!) commits[s] = commitOf();
  if (opts.only!.includes('robust')) {
    await rerunRobust(report, p, log);
    sections.robust = new Date().toISOString();
  }
  if (opts.only!.includes('overhead')) {
    report.overhead = await runOverhead(p, opts.runs, log);
    report.timings.overheadMs = report.overhead.wallMs;
    sections.overhead = new Date().toISOString();
  }
  if (opts.only!.includes('verification')) {
    report.verification = await measureVerification(opts.quick, job, log);
    sections.verification = new Date().toISOString();
  }
  if (opts.only!.includes('n64')) {
    const pool = new CellPool(p.processes, p.job);
    try {
      const progress = new Progress(n64Cells(p).length, log);
      report.n64 = await runN64Section(pool, p, progress);
      report.timings.n64 = { cells: progress.wallMs.n64.length, ms: spread(progress.wallMs.n64), totalMs: progress.wallMs.n64.reduce((a, b) => a + b, 0) };
    } finally {
      pool.close();
    }
    sections.n64 = new Date().toISOString();
  }
  if (opts.only!.includes('capture')) {
    report.capture = await runCapture(opts.quick, log);
    sections.capture = new Date().toISOString();
  }
  if (opts.only!.includes('dgc')) {
    report.dgc = await runDgc(opts.quick, p, log);
    sections.dgc = new Date().toISOString();
  }
  // `collapsed` follows COLLAPSE_BELOW, which may have moved since the cells ran.
  for (const c of [...report.matrix, ...report.fullCells, ...(report.n64?.cells ?? [])] as Finished[]) if (c.error === null) c.collapsed = isCollapsed(c);
  report.matrixTestAccuracy = matrixTable(report.matrix);
  report.settings.meanScaledF1 = settingOf((report.fullCells as Cell[]).filter((c) => c.rule === 'mean' && c.attackers === 1 && c.attack === 'scaled'));
  const cells: SummaryCells = {
    clean: report.settings.clean, meanScaledF1: report.settings.meanScaledF1,
    worstF5: { choice: report.worstAttacks.f5, settings: report.settings.worstF5 }, worstF7: { choice: report.worstAttacks.f7, settings: report.settings.worstF7 },
  };
  Object.assign(report, runRecord(t0, benchCommand('byzantine', opts)), {
    sectionDates: sections, sectionCommits: commits, plan: { ...report.plan, n64: p.n64 }, definitions: { ...definitions(p), n64: definitionsN64(p) },
    summary: fullSummary(cells, report.overhead, report.verification, report.n64, report.capture, report.dgc),
  });
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  log(`re-ran ${opts.only!.join(', ')} in ${((Date.now() - t0) / 60_000).toFixed(1)} min; wrote ${file}\n${JSON.stringify(report.summary, null, 2)}`);
}

/** Re-runs the centered-clip matrix cells and the summary settings they decide, into `report`. */
async function rerunRobust(report: any, p: Plan, log: (line: string) => void): Promise<void> {
  const robust = matrixCells(p).filter((s) => s.rule === ROBUST_RULE);
  const fullCount = (1 + 2 * p.worstAttacksAtFullLength) * p.seeds.length;
  const progress = new Progress(robust.length + fullCount, log);
  const pool = new CellPool(p.processes, p.job);
  try {
    const fresh = await Promise.all(robust.map((s) => runCell(pool, s, PRIORITY.choosesWorst, progress)));
    const byName = new Map(fresh.map((c) => [c.name, c]));
    report.matrix = (report.matrix as Cell[]).map((c) => byName.get(c.name) ?? c);
    const setting = async (attackers: number, attack: Attack | null) => {
      const runs = await Promise.all(fullCells(p, attackers, attack, ROBUST_RULE).map((s) => runCell(pool, s, PRIORITY.full, progress)));
      return { runs, setting: settingOf(runs) };
    };
    const worst = async (f: number) => {
      const choice = chooseWorst(fresh, f, p.worstAttacksAtFullLength);
      const runs = await Promise.all(choice.chosen.map((a) => setting(f, a)));
      return { choice, runs };
    };
    const [clean, f5, f7] = await Promise.all([setting(0, null), worst(5), worst(7)]);
    const meanCells = (report.fullCells as Cell[]).filter((c) => c.rule !== ROBUST_RULE);
    report.fullCells = [...clean.runs, ...f5.runs.flatMap((r) => r.runs), ...f7.runs.flatMap((r) => r.runs), ...meanCells];
    report.settings = { ...report.settings, clean: clean.setting, worstF5: f5.runs.map((r) => r.setting), worstF7: f7.runs.map((r) => r.setting) };
    report.worstAttacks = { f5: f5.choice, f7: f7.choice };
  } finally {
    pool.close();
  }
}

const SECTIONS = ['matrix', 'summaryCells', 'overhead', 'verification', 'n64', 'capture', 'dgc'];

async function runAll(file: string, opts: BenchOptions): Promise<void> {
  const { job, from } = jobSettings(opts.quick);
  const p = plan(opts.quick, job, os.cpus().length);
  const t0 = Date.now();
  const clock = () => {
    const s = Math.round((Date.now() - t0) / 1000);
    return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
  };
  const log = (line: string) => console.log(`[byzantine] ${clock()} ${line}`);
  const fullCount = (2 + 2 * p.worstAttacksAtFullLength) * p.seeds.length + n64Cells(p).length;
  log(`${opts.quick ? 'quick mode, ' : ''}${matrixCells(p).length} short cells, ${fullCount} full-length runs (N = 64 included), ${p.processes} processes; load average ` +
    `${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);

  const overhead = await runOverhead(p, opts.runs, log);
  // Before the cells: its Chromium page and server would slow them, and they it.
  const verification = await measureVerification(opts.quick, p.job, log);
  const progress = new Progress(matrixCells(p).length + fullCount, log);
  const pool = new CellPool(p.processes, p.job);
  let matrix: Cell[], full: Awaited<ReturnType<typeof runSummaryCells>>, n64: N64Section;
  try {
    const running = runMatrix(pool, p, progress);
    [matrix, full, n64] = await Promise.all([running.cells, runSummaryCells(pool, p, running, progress), runN64Section(pool, p, progress)]);
  } finally {
    pool.close();
  }
  // After the cells: the capture's server and simulated members, and DGC's own child processes.
  const capture = await runCapture(opts.quick, log);
  const dgc = await runDgc(opts.quick, p, log);
  const timing = (xs: number[]) => ({ cells: xs.length, ms: spread(xs), totalMs: xs.reduce((a, b) => a + b, 0) });
  const report = {
    benchmark: 'byzantine', ...runRecord(t0, benchCommand('byzantine', opts)), quick: opts.quick,
    job: { workers: WORKERS, strategy: 'localsgd', ...p.job, settingsFrom: from, strategyChoice: STRATEGY_CHOICE,
      backend: 'CPU (packages/tensor CpuBackend), all workers of a cell in one child process' },
    plan: {
      lengths: p.lengths, matrix: p.matrix, seeds: p.seeds, worstAttacksAtFullLength: p.worstAttacksAtFullLength, n64: p.n64, processes: p.processes, linkModels: p.linkModels,
      overheadReps: opts.runs,
    },
    definitions: { ...definitions(p), n64: definitionsN64(p) },
    timings: { short: timing(progress.wallMs.short), full: timing(progress.wallMs.full), n64: timing(progress.wallMs.n64), overheadMs: overhead.wallMs },
    worstAttacks: { f5: full.settings.worstF5.choice, f7: full.settings.worstF7.choice },
    settings: { clean: full.settings.clean, meanScaledF1: full.settings.meanScaledF1, worstF5: full.settings.worstF5.settings, worstF7: full.settings.worstF7.settings },
    overhead,
    matrixTestAccuracy: matrixTable(matrix),
    matrix,
    fullCells: full.cells,
    verification,
    n64,
    capture,
    dgc,
    sectionDates: Object.fromEntries(SECTIONS.map((k) => [k, new Date(t0).toISOString()])),
    sectionCommits: Object.fromEntries(SECTIONS.map((k) => [k, commitOf()])),
    summary: fullSummary(full.settings, overhead, verification, n64, capture, dgc),
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  log(`wrote ${file}\n${JSON.stringify(report.summary, null, 2)}`);
}
