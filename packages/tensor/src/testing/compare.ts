// Tolerance comparison used by kernel tests in Node and in the browser.

export interface Mismatch {
  index: number;
  actual: number;
  expected: number;
}

/**
 * Elements where |actual − expected| > atol·scale + rtol·|expected|, with scale = max(1, rms(expected)):
 * atol is meant for unit-scale data, so a sum of 784 products (magnitude ~28) gets a proportional
 * absolute allowance for cancellation near zero. NaN and ±Inf must match exactly.
 */
export function mismatches(actual: ArrayLike<number>, expected: ArrayLike<number>, rtol: number, atol: number, limit = 5): Mismatch[] {
  const out: Mismatch[] = [];
  if (actual.length !== expected.length) return [{ index: -1, actual: actual.length, expected: expected.length }];
  let sq = 0, finite = 0;
  for (let i = 0; i < expected.length; i++) if (Number.isFinite(expected[i])) (sq += expected[i] ** 2), finite++;
  atol *= Math.max(1, Math.sqrt(sq / Math.max(1, finite)));
  for (let i = 0; i < actual.length && out.length < limit; i++) {
    const a = actual[i], e = expected[i];
    if (Number.isNaN(e) || !Number.isFinite(e)) {
      if (!Object.is(a, e) && !(Number.isNaN(a) && Number.isNaN(e))) out.push({ index: i, actual: a, expected: e });
    } else if (!(Math.abs(a - e) <= atol + rtol * Math.abs(e))) out.push({ index: i, actual: a, expected: e });
  }
  return out;
}
