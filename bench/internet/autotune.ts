// The auto-tuner's predicted sync time against the measured one, on real links (issue 36): an `auto`
// job (pacing 'auto': the server picks each sync's H and payload precision, pacing.ts AutoSync) with
// four Node volunteers in two homes behind EIM NATs on capped uplinks (volunteer-lab.ts). At each
// commit the server predicts the next sync's time (SyncTimeModel: the slowest member's planned steps
// × its measured pace, plus the exchange AutoSync expects at the chosen precision) and, at the next
// commit, scores it against what happened (commit to commit). The job summary shows the last pair
// (`syncTime.last`) and the server's median error; the benchmark polls the summary and keeps every
// pair. Wall clock at the server, nothing modeled.
import type { JobView, VolunteerLab } from './volunteer-lab';

export interface AutotuneOptions {
  /** The job's nominal H (auto picks 1 … 8 × it per sync). */
  H: number;
  /**
   * Commits it runs for; its volunteers are stopped then, the job not at its target (far off: no
   * sync is cut to it). Its end is not measured: a paced job's final checkpoint upload once hung here.
   */
  syncs: number;
  log?: (line: string) => void;
}

export interface SyncPrediction {
  /** The sync ended by this commit (the job's seq then). */
  seq: number;
  predictedMs: number;
  actualMs: number;
  /** |predicted − actual| ÷ actual. */
  error: number;
  /** What auto chose for this sync's successor at that commit (H and precision). */
  auto: { H: number; dtype: string } | null;
}

export interface AutotuneFigures {
  jobId: string;
  spec: Record<string, unknown>;
  /** Committed ring rounds, and every round's mode and outcome. */
  committed: number;
  rounds: { seq: number; mode: string; outcome: string; ms: number | null }[];
  /** Every scored sync seen in the job summary (polled about every 100 ms). */
  predictions: SyncPrediction[];
  /** Commits the poll did not see (two between polls): their pairs are missing from `predictions`. */
  unseenCommits: number;
  /** Median of `predictions`' errors: `autotune_error_measured`. */
  medianError: number | null;
  /** The server's own median (over its last 32 scored syncs) when the job was done. */
  serverMedianError: number | null;
  /** What auto chose last, and its exchange estimates per precision (ms). */
  autoFinal: unknown;
}

export async function measureAutotune(lab: VolunteerLab, opts: AutotuneOptions): Promise<AutotuneFigures> {
  const log = opts.log ?? (() => {});
  const spec = {
    preset: 'mlp-fashion', dataset: 'synthetic-blobs', strategy: 'localsgd', H: opts.H, pacing: 'auto', trust: 'trusted',
    hyperparameters: { lr: 0.05, batchSize: 16 }, minWorkers: 4, maxWorkers: 4, targetSteps: 1_000_000,
  };
  const predictions: SyncPrediction[] = [];
  let lastSeq = 0;
  let unseenCommits = 0;
  let lastKey = '';
  const job = await lab.runJob(spec, ['a1', 'b1', 'a2', 'b2'], (view) => {
    see(view);
    return view.seq >= opts.syncs;
  });
  function see(view: JobView): void {
    if (view.seq === lastSeq) return;
    unseenCommits += Math.max(0, view.seq - lastSeq - 1);
    lastSeq = view.seq;
    const last = view.syncTime?.last;
    // A reset prediction (members changed, a round aborted) leaves the previous pair in the summary: not a new one.
    const key = last ? `${last.predictedMs}/${last.actualMs}` : '';
    if (!last || key === lastKey) return;
    lastKey = key;
    const auto = view.syncTime?.auto ? { H: view.syncTime.auto.H, dtype: view.syncTime.auto.dtype } : null;
    predictions.push({ seq: view.seq, ...last, error: Math.abs(last.predictedMs - last.actualMs) / Math.max(last.actualMs, 1), auto });
    log(`autotune sync ${view.seq}: predicted ${last.predictedMs} ms, took ${last.actualMs} ms; next H ${auto?.H ?? '–'} ${auto?.dtype ?? ''}`);
  }
  const errors = predictions.map((p) => p.error).sort((a, b) => a - b);
  const rounds = job.rounds.map(({ seq, mode, outcome, ms }) => ({ seq, mode, outcome, ms }));
  return {
    jobId: job.jobId, spec, committed: rounds.filter((r) => r.mode === 'ring' && r.outcome === 'committed').length, rounds, predictions, unseenCommits,
    // The server's median: the lower middle of an even count (pacing.ts SyncTimeModel.medianError).
    medianError: errors.length ? errors[(errors.length - 1) >> 1] : null,
    serverMedianError: job.final.syncTime?.medianError ?? null, autoFinal: job.final.syncTime?.auto ?? null,
  };
}
