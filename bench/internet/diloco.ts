// DiLoCo + DGC against DDP on real links (issue 36): a GPT on the fortunes corpus (byte tokens, the lm
// benchmark's model and inner settings) trained by four Node volunteers, each in its own home behind
// an endpoint-independent NAT with a 10 Mbit/s tbf uplink, with the real server in a public host
// (volunteer-lab.ts), by the runtime's DDP (H 1: one ring round through the server per step) and by
// DiLoCo with DGC (H 16), seeds interleaved (DDP s1, DGC s1, DDP s2, …). Time to target is wall clock
// at the server: from the first round's begin (all four members in) to the first evaluation of the
// global model at or below a validation-loss target fixed in config.ts before any run. A run stops
// there (its volunteers end), or at its step cap, which then counts its whole time (a lower bound).
// Nothing is modeled: every volunteer's compute runs on this machine's shared CPU cores, beside the
// three others, the server and the routers.
import { median, spread, type Spread } from '../stats';
import type { DilocoPlan } from './config';
import { openVolunteerLab, type JobRun, type VolunteerLab } from './volunteer-lab';

export type DilocoVariant = 'ddp' | 'diloco-dgc';
/** Homes (one volunteer each) in the order the volunteers join. */
export const DILOCO_HOMES = ['a', 'b', 'c', 'd'];

export interface EvalPoint {
  /** Server time since the first round began, ms. */
  ms: number;
  step: number;
  loss: number;
}

export interface DilocoRun {
  variant: DilocoVariant;
  seed: number;
  jobId: string;
  spec: Record<string, unknown>;
  /** First round's begin to the first evaluation at or below the target; null: never reached (see msCounted). */
  msToTarget: number | null;
  /** msToTarget, or for a run that never reached the target its whole time (first round to last commit): a lower bound. */
  msCounted: number;
  reached: boolean;
  /** The step of the evaluation that reached the target (else the last step). */
  stepAtTarget: number;
  /** Validation loss of the global model at each evaluation (the evaluators' upper median). */
  evals: EvalPoint[];
  /** Committed ring rounds (syncs) until the run stopped, and rounds of any other outcome or mode. */
  syncs: number;
  /** Committed rounds a member was left out of (not ready in time: the server's barrier went on without it). */
  shortRounds: number;
  /** afterCounted: began after the counted time (the round the stop at the target cut off). */
  otherRounds: { seq: number; mode: string; outcome: string; afterCounted: boolean }[];
  /** UDP bytes each home's router sent out through its WAN, job created to volunteers stopped, and their sum. */
  uplinkBytes: Record<string, number>;
  uplinkBytesTotal: number;
  /** What each volunteer's collectives sent (frames), by host. */
  frameBytesSent: Record<string, number>;
  /**
   * Where the counted time went: inRoundsMs, the rounds' begin to commit at the server (the exchange,
   * every member's prepare and commit); betweenRoundsMs, the rest (local steps, evaluation, the
   * members' ready messages). Up to the evaluation that reached the target.
   */
  split: { inRoundsMs: number; betweenRoundsMs: number; rounds: number };
}

interface RoundRecord { seq: number; mode: string; outcome: string; members: string[]; startedAt: number; endedAt: number | null }
interface MetricRow { seq: number; step: number; time: number; loss: number | null; accuracy: number | null }

/** The job a variant runs: the lm benchmark's GPT and inner optimizer, fixed pacing, trusted ring. */
export function dilocoSpec(plan: DilocoPlan, variant: DilocoVariant, seed: number): Record<string, unknown> {
  return {
    name: `internet ${variant} seed ${seed}`, preset: 'gpt', gpt: plan.gpt, dataset: 'fortunes', tokenizer: 'bytes',
    ...(variant === 'ddp' ? { strategy: 'ddp', H: 1, compression: 'none' } : { strategy: 'diloco', H: plan.H, compression: 'dgc' }),
    // Fixed: every member takes exactly H steps a sync, fp32 payloads (auto would pick steps and precision), as lm ran them.
    pacing: 'fixed', trust: 'trusted', seed, minWorkers: DILOCO_HOMES.length, maxWorkers: DILOCO_HOMES.length,
    hyperparameters: { optimizer: 'adamw', lr: plan.lr, weightDecay: plan.weightDecay, batchSize: plan.batchSize },
    targetSteps: plan.maxSteps, evalEverySteps: plan.evalEverySteps,
    // A checkpoint is evaluated too: only the evaluations every evalEverySteps, the same steps for both.
    checkpointEvery: 100_000,
  };
}

/** One run: the job until an evaluation reaches the target (or its step cap), in `lab` (homes a–d of one host). */
export async function runDilocoVariant(lab: VolunteerLab, plan: DilocoPlan, variant: DilocoVariant, seed: number, log: (l: string) => void): Promise<DilocoRun> {
  const spec = dilocoSpec(plan, variant, seed);
  let lastLook = 0;
  const reachedTarget = async (jobId: string): Promise<boolean> => {
    // The metrics every second at most: evaluations come a few seconds apart at the closest.
    if (Date.now() - lastLook < 1_000) return false;
    lastLook = Date.now();
    const points = (await lab.api(`/api/jobs/${jobId}/metrics`)).body.points as MetricRow[];
    return points.some((p) => p.accuracy !== null && p.loss !== null && p.loss <= plan.target);
  };
  // A member lost mid-run (the job would go on with fewer, each faster on the shared cores) ends the run as a failure.
  let lost: string | null = null;
  const job = await lab.runJob(spec, DILOCO_HOMES.map((h) => `${h}1`), (view, jobId) => {
    if (view.seq > 0 && (view.workers ?? 0) < DILOCO_HOMES.length) lost = `job ${jobId}: ${view.workers} of ${DILOCO_HOMES.length} members left at sync ${view.seq}`;
    return lost !== null || reachedTarget(jobId);
  });
  if (lost) throw new Error(lost);
  const rounds = (await lab.api(`/api/jobs/${job.jobId}/rounds`)).body.rounds as RoundRecord[];
  const points = (await lab.api(`/api/jobs/${job.jobId}/metrics`)).body.points as MetricRow[];
  const run = dilocoFigures(job, rounds, points, plan.target, variant, seed, spec);
  log(`diloco ${variant} seed ${seed}: ${run.reached ? `target ${plan.target} at step ${run.stepAtTarget}` : `target not reached by step ${run.stepAtTarget}`}, ` +
    `${(run.msCounted / 1000).toFixed(1)} s, ${run.syncs} syncs, ${(run.uplinkBytesTotal / 1e6).toFixed(1)} MB over the uplinks; evals ` +
    `${run.evals.map((e) => `${e.step}:${e.loss.toFixed(3)}@${(e.ms / 1000).toFixed(0)}s`).join(' ')}`);
  return run;
}

/** The figures of one run from the server's rounds and metric points (server clock throughout). */
export function dilocoFigures(job: JobRun, rounds: RoundRecord[], points: MetricRow[], target: number, variant: DilocoVariant, seed: number,
  spec: Record<string, unknown>): DilocoRun {
  if (rounds.length === 0) throw new Error(`job ${job.jobId}: no round began`);

  const t0 = Math.min(...rounds.map((r) => r.startedAt));
  const committed = rounds.filter((r) => r.mode === 'ring' && r.outcome === 'committed' && r.endedAt !== null);
  const evals = points.filter((p) => p.accuracy !== null && p.loss !== null).map((p) => ({ ms: p.time - t0, step: p.step, loss: p.loss! }));
  const hit = evals.find((e) => e.loss <= target) ?? null;
  const lastCommit = committed.length ? Math.max(...committed.map((r) => r.endedAt!)) - t0 : 0;
  const msCounted = hit ? hit.ms : Math.max(lastCommit, evals.at(-1)?.ms ?? 0);
  const counted = committed.filter((r) => r.endedAt! - t0 <= msCounted);
  const inRoundsMs = counted.reduce((s, r) => s + (r.endedAt! - r.startedAt), 0);
  const uplinkBytesTotal = Object.values(job.uplinkBytes).reduce((x, y) => x + y, 0);
  return {
    variant, seed, jobId: job.jobId, spec, msToTarget: hit ? hit.ms : null, msCounted, reached: hit !== null,
    stepAtTarget: hit ? hit.step : Math.max(0, ...points.map((p) => p.step)), evals, syncs: committed.length,
    shortRounds: committed.filter((r) => r.members.length < DILOCO_HOMES.length).length,
    otherRounds: rounds.filter((r) => !(r.mode === 'ring' && r.outcome === 'committed'))
      .map(({ seq, mode, outcome, startedAt }) => ({ seq, mode, outcome, afterCounted: startedAt - t0 > msCounted })),
    uplinkBytes: job.uplinkBytes, uplinkBytesTotal,
    frameBytesSent: Object.fromEntries(Object.entries(job.volunteers).map(([name, v]) => [name, v.bytesSent])),
    split: { inRoundsMs, betweenRoundsMs: msCounted - inRoundsMs, rounds: counted.length },
  };
}

export interface DilocoFigures {
  lab: ReturnType<VolunteerLab['describe']>;
  plan: DilocoPlan;
  uplinkMbit: number;
  /** Every run in the order it ran (seeds interleaved), and any run that failed (its error). */
  runs: DilocoRun[];
  failedRuns: { variant: DilocoVariant; seed: number; error: string }[];
  /** Per variant: time counted (ms) per seed, its median and spread, and how many reached the target. */
  variants: Record<DilocoVariant, { seeds: number[]; msCounted: number[]; medianMs: number; spreadMs: Spread | null; reached: string; uplinkBytesMedian: number }>;
  /** DDP ÷ DiLoCo + DGC, seed by seed (seeds both ran); a run not at the target makes its side a lower bound. */
  speedupPerSeed: { seed: number; speedup: number; ddpReached: boolean; dgcReached: boolean }[];
  /** Median DDP time ÷ median DiLoCo + DGC time: `diloco_dgc_speedup_measured`. */
  speedup: number;
  /** A run of either variant that never reached the target counted its whole time. */
  anyNotReached: boolean;
  /** DDP ÷ DiLoCo + DGC median bytes over the four uplinks per run. */
  uplinkBytesRatio: number;
}

/** Both variants, seeds interleaved, in a lab of their own: four homes (a–d) of one volunteer each. */
export async function measureDiloco(plan: DilocoPlan, uplinkMbit: number, log: (l: string) => void): Promise<DilocoFigures> {
  const lab = await openVolunteerLab({ homes: DILOCO_HOMES, perHome: 1, uplinkMbit, log });
  const runs: DilocoRun[] = [];
  const failedRuns: DilocoFigures['failedRuns'] = [];
  try {
    for (const seed of plan.seeds) {
      for (const variant of ['ddp', 'diloco-dgc'] as const) {
        try {
          runs.push(await runDilocoVariant(lab, plan, variant, seed, log));
        } catch (e) {
          failedRuns.push({ variant, seed, error: (e as Error).message.slice(0, 4000) });
          log(`diloco ${variant} seed ${seed} failed: ${(e as Error).message.slice(0, 2000)}`);
        }
      }
    }
    return { lab: lab.describe(), plan, uplinkMbit, runs, failedRuns, ...dilocoSummary(runs) };
  } finally {
    await lab.close();
  }
}

/** The variants' medians and the speedup from the runs that completed; a variant with none is an error. */
export function dilocoSummary(runs: DilocoRun[]) {
  const of = (v: DilocoVariant) => runs.filter((r) => r.variant === v);
  for (const v of ['ddp', 'diloco-dgc'] as const) if (of(v).length === 0) throw new Error(`no ${v} run completed`);
  const cell = (v: DilocoVariant) => {
    const rs = of(v);
    return {
      seeds: rs.map((r) => r.seed), msCounted: rs.map((r) => r.msCounted), medianMs: median(rs.map((r) => r.msCounted)), spreadMs: spread(rs.map((r) => r.msCounted)),
      reached: `${rs.filter((r) => r.reached).length}/${rs.length}`, uplinkBytesMedian: median(rs.map((r) => r.uplinkBytesTotal)),
    };
  };
  const variants = { ddp: cell('ddp'), 'diloco-dgc': cell('diloco-dgc') };
  const speedupPerSeed = of('ddp').flatMap((d) => of('diloco-dgc').filter((g) => g.seed === d.seed)
    .map((g) => ({ seed: d.seed, speedup: d.msCounted / g.msCounted, ddpReached: d.reached, dgcReached: g.reached })));
  return {
    variants, speedupPerSeed, speedup: variants.ddp.medianMs / variants['diloco-dgc'].medianMs, anyNotReached: runs.some((r) => !r.reached),
    uplinkBytesRatio: variants.ddp.uplinkBytesMedian / variants['diloco-dgc'].uplinkBytesMedian,
  };
}
