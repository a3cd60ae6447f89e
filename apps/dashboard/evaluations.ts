// A job's evaluations as the dashboard shows them: points arrive as they are recorded, and an
// evaluation may be recorded after a newer sync's (a slow evaluator has its bound to report), so the
// chart and the figure go by sync, not by arrival.
import type { MetricPoint } from '@tabfleet/protocol';

/** The evaluated points (those with an accuracy) in sync order; of two for one sync, the later recorded last. */
export function evaluationsBySync(points: readonly MetricPoint[]): MetricPoint[] {
  return points.filter((p) => p.accuracy !== null).sort((a, b) => a.seq - b.seq);
}
