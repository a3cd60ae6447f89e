// What a fuzz target is: one property of one decoder, run briefly by `npm test` (its *.fuzz.test.ts)
// and for a time budget by `npm run fuzz` (scripts/fuzz.ts), which records cases per decoder.
import fc from 'fast-check';

export interface OpenProperty {
  property: fc.IRawProperty<any>;
  close?(): Promise<void>;
}

export interface FuzzTarget {
  /** The decoder it covers: cases are totalled per decoder in bench/results/fuzz.json. */
  decoder: string;
  name: string;
  /** Cases in `npm test`: the whole short budget stays under about 20 s on this machine. */
  quickRuns: number;
  /** Builds the property (and starts what it needs, e.g. a server). */
  open(): Promise<OpenProperty> | OpenProperty;
}

type ErrorClass = abstract new (...args: never[]) => Error;

/**
 * Runs a decoder: its value, or `undefined` when it refused the input with one of `allowed`. Anything
 * else it throws (TypeError, RangeError from a DataView, …) is rethrown, failing the property.
 */
export function decodeOrRefuse<T>(decode: () => T, ...allowed: ErrorClass[]): T | undefined {
  try {
    return decode();
  } catch (e) {
    if (allowed.some((c) => e instanceof c)) return undefined;
    throw e;
  }
}

/** Runs one target for `numRuns` cases and throws fast-check's report on a counterexample. */
export async function assertTarget(t: FuzzTarget, numRuns = t.quickRuns): Promise<void> {
  const { property, close } = await t.open();
  try {
    await fc.assert(property, { numRuns });
  } finally {
    await close?.();
  }
}
