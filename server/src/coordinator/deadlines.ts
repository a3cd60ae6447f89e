// Deadlines that follow the job's pace (this file was pace.ts; pacing.ts and step-planner.ts plan the work itself).
// How long the job's members usually take, so a deadline follows their pace rather than a fixed
// minute: a bound is a multiple of the median of recent durations, kept between a floor and the
// configured maximum. Until there is history the configured maximum (or a given first guess) holds.
/** `overrun`: how far members' local work runs past its time budget (all of it without one). */
export type PaceKind = 'round' | 'overrun' | 'load' | 'upload' | 'evaluate';

/** Durations remembered per kind. */
const WINDOW = 16;
/** A member may take this many times the median before it is given up on. */
const FACTOR = 4;
/** Never less than this by default (scheduling jitter, a GC pause). */
const FLOOR_MS = 5_000;

export class Deadlines {
  private readonly recent = new Map<PaceKind, number[]>();

  /** `floorMs`: the configured floor, read when a bound is asked (FLOOR_MS when it says none). */
  constructor(private readonly floorMs: () => number | undefined = () => undefined) {}

  record(kind: PaceKind, ms: number): void {
    const xs = this.recent.get(kind) ?? [];
    xs.push(Math.max(0, ms));
    if (xs.length > WINDOW) xs.shift();
    this.recent.set(kind, xs);
  }

  /** The median of the recent durations of `kind`, or null without history. */
  median(kind: PaceKind): number | null {
    const xs = this.recent.get(kind);
    if (!xs?.length) return null;
    return [...xs].sort((a, b) => a - b)[(xs.length - 1) >> 1];
  }

  /** FACTOR × median + FLOOR, at most `capMs`; `firstGuessMs` (else `capMs`) without history. */
  bound(kind: PaceKind, capMs: number, firstGuessMs = capMs): number {
    const xs = this.recent.get(kind);
    const floor = this.floorMs() ?? FLOOR_MS;
    if (!xs?.length) return Math.min(capMs, Math.max(floor, firstGuessMs));
    const sorted = [...xs].sort((a, b) => a - b);
    const median = sorted[(sorted.length - 1) >> 1];
    return Math.min(capMs, Math.round(FACTOR * median) + floor);
  }
}
