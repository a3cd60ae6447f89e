// Bigger models over thinner links (issue 38), measured on real capped links: a GPT on the fortunes
// corpus trained by four Node volunteers, each in its own home behind an endpoint-independent NAT with
// a tbf uplink cap, the real server in a public host (volunteer-lab.ts), by DDP, DiLoCo + DGC, DiLoCo +
// int8, DiLoCo + E2M1 and Streaming DiLoCo + E2M1; and one volunteer alone (the curve the target and
// the equal-tokens loss come from), measured in the same lab. Time is wall clock at the server, from
// the first round's begin to the first evaluation of the global model at or below the target; bytes
// are what the members' collectives sent (the sync metric points), up to that evaluation. A run goes
// on past the target to the equal-tokens step (every variant's loss is compared there with the single
// volunteer's at the same tokens), and stops at its step cap if it never gets there. Nothing is
// modeled: every volunteer computes on this machine's shared CPU cores.
import { median, spread, type Spread } from '../stats';
import type { JobRun, VolunteerLab } from './volunteer-lab';

export const LM_LAB_VARIANTS = ['single', 'ddp', 'diloco-dgc', 'diloco-int8', 'diloco-q4', 'streaming-q4'] as const;
export type LmLabVariant = (typeof LM_LAB_VARIANTS)[number];
/** The variants this issue adds, against today's best (DiLoCo + DGC). */
export const NEW_VARIANTS: readonly LmLabVariant[] = ['diloco-int8', 'diloco-q4', 'streaming-q4'];
/** Homes (one volunteer each) in the order the volunteers join; the single run uses the first. */
export const LM_LAB_HOMES = ['a', 'b', 'c', 'd'];

export interface LmLabPlan {
  gpt: { layers: number; heads: number; width: number; context: number };
  batchSize: number;
  lr: number;
  weightDecay: number;
  /** DiLoCo's local steps per sync. */
  H: number;
  /** Streaming DiLoCo: a sync every H steps, each fragment every fragments × H (so each fragment as often as DiLoCo's model). */
  streaming: { H: number; fragments: number; overlapSteps: number };
  /** Steps per member at which four members have seen the single volunteer's `singleSteps` × batch tokens. */
  equalTokenSteps: number;
  singleSteps: number;
  /** A run that has not reached the target by this step stops there (its whole time counts: a lower bound). */
  maxSteps: number;
  evalEverySteps: number;
  seeds: number[];
  target: number;
  targetRule: string;
  /** Each uplink cap and the variants measured behind it. */
  caps: { mbit: number; variants: LmLabVariant[] }[];
}

/** The job a variant runs: the plan's GPT and inner AdamW, fixed pacing, a trusted ring. */
export function lmLabSpec(plan: LmLabPlan, variant: LmLabVariant, seed: number): Record<string, unknown> {
  const members = variant === 'single' ? 1 : LM_LAB_HOMES.length;
  const sync: Record<LmLabVariant, Record<string, unknown>> = {
    single: { strategy: 'ddp', H: 1, compression: 'none' },
    ddp: { strategy: 'ddp', H: 1, compression: 'none' },
    'diloco-dgc': { strategy: 'diloco', H: plan.H, compression: 'dgc' },
    'diloco-int8': { strategy: 'diloco', H: plan.H, compression: 'int8' },
    'diloco-q4': { strategy: 'diloco', H: plan.H, compression: 'e2m1' },
    'streaming-q4': { strategy: 'diloco', H: plan.streaming.H, compression: 'e2m1', fragments: plan.streaming.fragments, overlapSteps: plan.streaming.overlapSteps },
  };
  return {
    name: `lm-lab ${variant} seed ${seed}`, preset: 'gpt', gpt: plan.gpt, dataset: 'fortunes', tokenizer: 'bytes', ...sync[variant],
    pacing: 'fixed', trust: 'trusted', seed, minWorkers: members, maxWorkers: members,
    hyperparameters: { optimizer: 'adamw', lr: plan.lr, weightDecay: plan.weightDecay, batchSize: plan.batchSize },
    targetSteps: variant === 'single' ? plan.singleSteps : plan.maxSteps, evalEverySteps: plan.evalEverySteps,
    // Evaluations only every evalEverySteps, the same steps for every variant.
    checkpointEvery: 100_000,
  };
}

export interface MetricRow { seq: number; step: number; time: number; loss: number | null; accuracy: number | null; bytesSent: number | null; workers: number }
interface RoundRecord { seq: number; mode: string; outcome: string; startedAt: number; endedAt: number | null }

export interface LmLabRun {
  variant: LmLabVariant;
  seed: number;
  uplinkMbit: number;
  jobId: string;
  spec: Record<string, unknown>;
  /** Server time from the first round's begin to the first evaluation at or below the target; null: never reached. */
  msToTarget: number | null;
  /** msToTarget, or (never reached) the run's whole time: a lower bound. */
  msCounted: number;
  reached: boolean;
  stepAtTarget: number | null;
  /** Bytes every member's collectives sent in the syncs up to the target (or the whole run), frames and headers. */
  bytesToTarget: number;
  /** The most one member sent in one sync. */
  peakSyncBytes: number;
  /** Validation loss at the equal-tokens step (single: singleSteps; others: equalTokenSteps); null: the run stopped before. */
  lossAtEqualTokens: number | null;
  evals: { ms: number; step: number; loss: number }[];
  syncs: number;
  /** Rounds that did not commit as ring rounds (star, aborted), up to the counted time. */
  otherRounds: { seq: number; mode: string; outcome: string }[];
  uplinkBytesTotal: number;
}

/** One run's figures from the server's rounds and metric points (server clock throughout). */
export function lmLabFigures(job: Pick<JobRun, 'jobId' | 'uplinkBytes'>, rounds: RoundRecord[], points: MetricRow[], plan: LmLabPlan,
  variant: LmLabVariant, seed: number, uplinkMbit: number, spec: Record<string, unknown>): LmLabRun {
  if (rounds.length === 0) throw new Error(`job ${job.jobId}: no round began`);
  const t0 = Math.min(...rounds.map((r) => r.startedAt));
  const evals = points.filter((p) => p.accuracy !== null && p.loss !== null).map((p) => ({ ms: p.time - t0, step: p.step, loss: p.loss! }));
  const syncs = points.filter((p) => p.accuracy === null && p.bytesSent !== null);
  const hit = evals.find((e) => e.loss <= plan.target) ?? null;
  const lastMs = Math.max(0, ...rounds.filter((r) => r.endedAt !== null).map((r) => r.endedAt! - t0), ...evals.map((e) => e.ms));
  const msCounted = hit ? hit.ms : lastMs;
  const equalStep = variant === 'single' ? plan.singleSteps : plan.equalTokenSteps;
  return {
    variant, seed, uplinkMbit, jobId: job.jobId, spec, msToTarget: hit?.ms ?? null, msCounted, reached: hit !== null, stepAtTarget: hit?.step ?? null,
    bytesToTarget: syncs.filter((p) => p.step <= (hit?.step ?? Infinity)).reduce((a, p) => a + p.bytesSent!, 0),
    peakSyncBytes: Math.max(0, ...syncs.map((p) => p.bytesSent! / Math.max(1, p.workers))),
    lossAtEqualTokens: evals.find((e) => e.step === equalStep)?.loss ?? null,
    evals, syncs: syncs.length,
    otherRounds: rounds.filter((r) => !(r.mode === 'ring' && r.outcome === 'committed') && r.startedAt - t0 <= msCounted)
      .map(({ seq, mode, outcome }) => ({ seq, mode, outcome })),
    uplinkBytesTotal: Object.values(job.uplinkBytes).reduce((a, b) => a + b, 0),
  };
}

/** One run in `lab`: until the target is reached and the equal-tokens step evaluated, or the job's end. */
export async function runLmLabVariant(lab: VolunteerLab, plan: LmLabPlan, variant: LmLabVariant, seed: number, uplinkMbit: number,
  log: (l: string) => void): Promise<LmLabRun> {
  const spec = lmLabSpec(plan, variant, seed);
  const members = variant === 'single' ? 1 : LM_LAB_HOMES.length;
  let lastLook = 0;
  const enough = async (jobId: string): Promise<boolean> => {
    if (Date.now() - lastLook < 1_000) return false;
    lastLook = Date.now();
    const evals = ((await lab.api(`/api/jobs/${jobId}/metrics`)).body.points as MetricRow[]).filter((p) => p.accuracy !== null && p.loss !== null);
    return evals.some((e) => e.loss! <= plan.target) && evals.some((e) => e.step >= plan.equalTokenSteps) && variant !== 'single';
  };
  let lost: string | null = null;
  const job = await lab.runJob(spec, LM_LAB_HOMES.slice(0, members).map((h) => `${h}1`), (view, jobId) => {
    if (view.seq > 0 && (view.workers ?? 0) < members) lost = `job ${jobId}: ${view.workers} of ${members} members left at sync ${view.seq}`;
    return lost !== null || enough(jobId);
  });
  if (lost) throw new Error(lost);
  const rounds = (await lab.api(`/api/jobs/${job.jobId}/rounds`)).body.rounds as RoundRecord[];
  const points = (await lab.api(`/api/jobs/${job.jobId}/metrics`)).body.points as MetricRow[];
  const run = lmLabFigures(job, rounds, points, plan, variant, seed, uplinkMbit, spec);
  log(`lm-lab ${uplinkMbit} Mbit/s ${variant} seed ${seed}: ${run.reached ? `target at step ${run.stepAtTarget}` : 'target not reached'}, ` +
    `${(run.msCounted / 1000).toFixed(1)} s, ${(run.bytesToTarget / 1e6).toFixed(2)} MB to it, peak ${(run.peakSyncBytes / 1e3).toFixed(1)} kB a sync, ` +
    `loss at equal tokens ${run.lossAtEqualTokens?.toFixed(4) ?? '—'}; evals ${run.evals.map((e) => `${e.step}:${e.loss.toFixed(3)}@${(e.ms / 1000).toFixed(0)}s`).join(' ')}`);
  return run;
}

export interface LmLabCell {
  seeds: number[];
  msCounted: number[];
  medianMs: number;
  spreadMs: Spread | null;
  reached: string;
  bytesToTarget: number[];
  medianBytesToTarget: number;
  medianPeakSyncBytes: number;
  lossAtEqualTokens: (number | null)[];
  medianLossAtEqualTokens: number | null;
}

/** Per variant: its runs' medians and spreads (seeds in order). */
export function lmLabCells(runs: LmLabRun[]): Partial<Record<LmLabVariant, LmLabCell>> {
  const cells: Partial<Record<LmLabVariant, LmLabCell>> = {};
  for (const v of LM_LAB_VARIANTS) {
    const rs = runs.filter((r) => r.variant === v);
    if (!rs.length) continue;
    const losses = rs.map((r) => r.lossAtEqualTokens);
    const known = losses.filter((l): l is number => l !== null);
    cells[v] = {
      seeds: rs.map((r) => r.seed), msCounted: rs.map((r) => r.msCounted), medianMs: median(rs.map((r) => r.msCounted)), spreadMs: spread(rs.map((r) => r.msCounted)),
      reached: `${rs.filter((r) => r.reached).length}/${rs.length}`, bytesToTarget: rs.map((r) => r.bytesToTarget), medianBytesToTarget: median(rs.map((r) => r.bytesToTarget)),
      medianPeakSyncBytes: median(rs.map((r) => r.peakSyncBytes)), lossAtEqualTokens: losses, medianLossAtEqualTokens: known.length === rs.length ? median(known) : null,
    };
  }
  return cells;
}
