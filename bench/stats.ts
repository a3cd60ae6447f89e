// Order statistics shared by the benchmarks (Node and pages).

/** Nearest-rank percentile (p in [0, 100]) of unsorted samples; NaN for none. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1];
}

/** Median of unsorted values (mean of the middle two for an even count); NaN for none. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

export interface Spread {
  median: number;
  min: number;
  max: number;
}

/** Median, min and max (over seeds); null for none. */
export function spread(xs: readonly number[]): Spread | null {
  return xs.length ? { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) } : null;
}

export interface Distribution {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

/** Rounded to 0.01 ms so the JSON stays readable. */
const r2 = (x: number) => Math.round(x * 100) / 100;

export function distribution(samples: readonly number[]): Distribution {
  const sum = samples.reduce((a, b) => a + b, 0);
  return {
    count: samples.length,
    p50: r2(percentile(samples, 50)),
    p90: r2(percentile(samples, 90)),
    p99: r2(percentile(samples, 99)),
    max: r2(samples.reduce((a, b) => Math.max(a, b), Number.NEGATIVE_INFINITY)),
    mean: r2(samples.length ? sum / samples.length : Number.NaN),
  };
}
