// What the runs-compared view plots and tabulates, apart from the page: each job's training loss and
// evaluated accuracy against the x axis the researcher picks, and the spec fields the picked jobs do
// not share.
import type { JobSpec, MetricPoint } from '@tabfleet/protocol';

export const X_AXES = ['step', 'samples', 'time'] as const;
export type XAxis = (typeof X_AXES)[number];

export interface XY {
  x: number;
  y: number;
}

export interface Curves {
  /** The members' mean training loss of each committed sync. */
  loss: XY[];
  /** Each evaluation's accuracy (test accuracy; next-token accuracy for text). */
  accuracy: XY[];
}

/** A training sync's point (an evaluation's point has no throughput). */
const isSync = (p: MetricPoint) => p.samplesPerSec !== null;

/**
 * Samples the job's members had trained on by each step: every sync's new steps times the batch
 * times the members it had (a fixed ddp job's global batch, and what a paced job's members add up to).
 */
function samplesByStep(points: readonly MetricPoint[], batchSize: number): (step: number) => number {
  const syncs = points.filter(isSync).sort((a, b) => a.step - b.step);
  const marks: { step: number; samples: number; workers: number }[] = [];
  let step = 0, samples = 0;
  for (const p of syncs) {
    samples += Math.max(0, p.step - step) * batchSize * p.workers;
    step = Math.max(step, p.step);
    marks.push({ step, samples, workers: p.workers });
  }
  return (s) => {
    let at = { step: 0, samples: 0, workers: marks[0]?.workers ?? 1 };
    for (const m of marks) if (m.step <= s) at = m;
    return at.samples + (s - at.step) * batchSize * at.workers;
  };
}

/**
 * A job's curves against step, samples seen or wall time. Wall time counts from the job's first metric
 * point, so jobs that waited differently for volunteers start together.
 */
export function curvesOf(points: readonly MetricPoint[], spec: { hyperparameters: { batchSize: number } }, axis: XAxis): Curves {
  const samplesAt = samplesByStep(points, spec.hyperparameters.batchSize);
  const t0 = points.reduce((t, p) => Math.min(t, p.time), Infinity);
  const xOf = (p: MetricPoint) => (axis === 'step' ? p.step : axis === 'samples' ? samplesAt(p.step) : (p.time - t0) / 1000);
  const byX = (a: XY, b: XY) => a.x - b.x;
  return {
    loss: points.filter((p) => isSync(p) && p.loss !== null).map((p) => ({ x: xOf(p), y: p.loss! })).sort(byX),
    accuracy: points.filter((p) => p.accuracy !== null).map((p) => ({ x: xOf(p), y: p.accuracy! })).sort(byX),
  };
}

/** A spec as dotted paths to leaf values (`hyperparameters.lr`, `gpt.layers`). */
function flatten(value: unknown, prefix = '', out: Map<string, unknown> = new Map()): Map<string, unknown> {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flatten(v, prefix ? `${prefix}.${k}` : k, out);
  } else out.set(prefix, value);
  return out;
}

/**
 * The settings that tell the picked jobs apart: every spec field (dotted) whose value is not the same
 * in all of them, in the specs' own order, with each job's value as text ('—' where it has none);
 * `leaveOut` names fields shown elsewhere.
 */
export function differingSettings(specs: readonly JobSpec[], leaveOut: readonly string[] = []): { fields: string[]; values: string[][] } {
  const flat = specs.map((s) => flatten(s));
  const fields: string[] = [];
  for (const m of flat) for (const k of m.keys()) if (!fields.includes(k)) fields.push(k);
  const text = (v: unknown) => (v === undefined ? '—' : typeof v === 'string' ? v : JSON.stringify(v));
  const differing = fields.filter((k) => !leaveOut.includes(k) && new Set(flat.map((m) => text(m.get(k)))).size > 1);
  return { fields: differing, values: flat.map((m) => differing.map((k) => text(m.get(k)))) };
}

/** Job ids from the compare view's address (`#/compare/a,b`), at most `limit`, each once. */
export function comparedIds(hash: string, limit: number): string[] | null {
  const m = /^#\/compare\/([\w,-]*)$/.exec(hash);
  if (!m) return null;
  return [...new Set(m[1].split(',').filter(Boolean))].slice(0, limit);
}
