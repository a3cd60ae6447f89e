// The metric point a committed sync leaves (the members' mean training loss, their summed throughput
// and bytes): what the store keeps and the dashboard charts, for ring, star, group and Moshpit syncs alike.
import type { MetricPoint } from '@tabfleet/protocol';
import type { RoundResult } from './round';

export function syncPoint(seq: number, step: number, time: number, results: readonly RoundResult[], workers: number): MetricPoint {
  const losses = results.map((x) => x.metrics.loss).filter((x): x is number => x !== null);
  return {
    seq, step, time, loss: losses.length ? losses.reduce((a, b) => a + b, 0) / losses.length : null, accuracy: null,
    samplesPerSec: results.reduce((sum, x) => sum + (x.metrics.wallMs > 0 ? (x.metrics.samples * 1000) / x.metrics.wallMs : 0), 0),
    bytesSent: results.reduce((sum, x) => sum + x.metrics.bytesSent, 0), workers,
  };
}

/** The distinct parameter checksums members reported after a sync (more than one: they disagree). */
export function checksumsOf(results: readonly RoundResult[]): string[] {
  return [...new Set(results.map((x) => x.checksum))];
}
