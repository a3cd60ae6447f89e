// `tabfleet watch ID`: polls the job and its metrics JSON, prints each new sync's loss and each
// evaluation's accuracy as a line, draws a bar towards the target steps on stderr, and exits when the
// job ends: 0 when it finished (done), 1 when it was stopped or failed.
import { targetStepsOf, type JobSummary, type MetricPoint } from '@tabfleet/protocol';
import { jobPath } from '../api';
import type { Command } from '../command';
import { CliError, EXIT } from '../errors';
import { formatBytes, type Output } from '../output';

export const DEFAULT_INTERVAL_S = 2;
const ENDED = new Set(['done', 'stopped', 'failed']);
/** Polls in a row whose job summary did not change before the metrics are asked for anyway. */
const QUIET_POLLS_PER_METRICS = 5;

/** A sync's point carries the bytes it sent; an evaluation's does not (the server keys them apart by seq). */
const kindOf = (p: MetricPoint) => (p.bytesSent === null ? 'eval' : 'sync');
const num = (x: number | null, digits: number) => (x === null ? '-' : x.toFixed(digits));

export function metricLine(p: MetricPoint, target: number): string {
  const head = `${kindOf(p)} ${String(p.seq).padStart(4)}  step ${p.step}/${target}  loss ${num(p.loss, 4)}`;
  if (kindOf(p) === 'eval') return `${head}  accuracy ${p.accuracy === null ? '-' : `${(p.accuracy * 100).toFixed(1)}%`}  ${p.vouchers ?? 1} evaluators`;
  const rate = p.samplesPerSec === null ? '' : `  ${Math.round(p.samplesPerSec).toLocaleString('en')} samples/s`;
  return `${head}  ${p.workers} volunteers${rate}  ${formatBytes(p.bytesSent ?? 0)} sent`;
}

interface Detail {
  job: JobSummary;
}

/** Prints what is new since the last poll; keeps what it printed so an updated evaluation prints again. */
class MetricsPrinter {
  private readonly printed = new Map<string, string>();
  constructor(private readonly out: Output, private readonly target: number, private readonly beforeLine: () => void, private readonly afterLine: () => void) {}

  print(points: MetricPoint[]): void {
    for (const p of points) {
      const key = `${kindOf(p)}:${p.seq}`, text = JSON.stringify(p);
      if (this.printed.get(key) === text) continue;
      this.printed.set(key, text);
      this.beforeLine();
      this.out.line({ event: 'metric', kind: kindOf(p), ...p }, metricLine(p, this.target));
      this.afterLine();
    }
  }
}

const status = (j: JobSummary, target: number) => ({ event: 'status', state: j.state, step: j.step, targetSteps: target, seq: j.seq, workers: j.workers });

export const watch: Command = {
  name: 'watch',
  usage: 'tabfleet watch ID [--interval SECONDS]',
  summary: 'follow a job until it ends: loss and accuracy lines, a bar to its target, volunteers',
  help: [
    `Polls GET /api/jobs/ID every --interval seconds (default ${DEFAULT_INTERVAL_S}), and its metrics JSON when the job moved.`,
    'Exit 0 when the job finished (done: its target steps or accuracy); 1 when it was stopped or failed.',
    '--json prints JSON lines: {"event":"metric",…} per sync or evaluation, {"event":"status",…} on a change, {"event":"end",…} last.',
  ],
  options: { interval: { type: 'string' } },
  async run({ args, values, out, api }) {
    if (args.length !== 1) throw new CliError(EXIT.usage, 'give one job id: tabfleet watch ID');
    const intervalS = values.interval === undefined ? DEFAULT_INTERVAL_S : Number(values.interval);
    if (!Number.isFinite(intervalS) || intervalS < 0.1 || intervalS > 3600) throw new CliError(EXIT.usage, '--interval is seconds between 0.1 and 3600');
    const client = api(), id = args[0];
    let { job } = await client.json<Detail>('GET', jobPath(id), undefined, `job ${id}`);
    const target = targetStepsOf(job.spec);
    const bar = out.progress(job.id, target, 'steps');
    const printer = new MetricsPrinter(out, target, () => bar.clear(), () => bar.restore());
    let lastStatus = '', lastMoved = '', quietPolls = 0;
    for (;;) {
      const s = status(job, target);
      if (JSON.stringify(s) !== lastStatus) {
        // Text mode says when the state changes (the end has its own line); JSON says every change of step, sync or volunteers.
        const changed = JSON.parse(lastStatus || '{}').state !== job.state && !ENDED.has(job.state);
        if (out.json || changed) {
          bar.clear();
          out.line(s, `${job.id} ${job.state}${job.state === 'waiting' ? ` for ${job.spec.minWorkers} volunteers` : ''}`);
        }
        lastStatus = JSON.stringify(s);
      }
      // The metrics JSON holds every point of the job: asked for when the job moved, else every few polls (an evaluation's late vouchers).
      const moved = JSON.stringify([job.seq, job.step, job.state, job.latestAccuracy, job.updatedAt]);
      if (moved !== lastMoved || ++quietPolls >= QUIET_POLLS_PER_METRICS || ENDED.has(job.state)) {
        const { points } = await client.json<{ points: MetricPoint[] }>('GET', jobPath(id, '/metrics'), undefined, `metrics of ${id}`);
        printer.print(points);
        lastMoved = moved;
        quietPolls = 0;
      }
      bar.update(job.step, { suffix: `  ${job.state}, ${job.workers} volunteers, sync ${job.seq}`, force: true });
      if (ENDED.has(job.state)) break;
      await new Promise((r) => setTimeout(r, intervalS * 1000));
      ({ job } = await client.json<Detail>('GET', jobPath(id), undefined, `job ${id}`));
    }
    bar.finish();
    const exit = job.state === 'done' ? EXIT.ok : EXIT.failure;
    const end = { event: 'end', state: job.state, endReason: job.endReason ?? null, step: job.step, targetSteps: target, seq: job.seq,
      latestAccuracy: job.latestAccuracy, latestCheckpoint: job.latestCheckpoint, exit };
    const ckpt = job.latestCheckpoint ? `; checkpoint of sync ${job.latestCheckpoint.seq}: tabfleet download ${job.id}` : '';
    out.line(end, `${job.id} ${job.state}${job.endReason ? `: ${job.endReason}` : ''} at step ${job.step}/${target}${ckpt}`);
    return exit;
  },
};
