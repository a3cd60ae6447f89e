// Which parts of a group round are validated (see the server's group-validation.ts and collective's
// Group.validate): chosen by the server, shared here so benchmarks and simulations draw them alike.
//
// The chance of catching an owner that lies every round is the chance its part is drawn: k/N per
// round with k parts checked of N. k averages VALIDATED_PART_SHARE·N (randomised rounding, at least
// one part), so a lying owner survives r rounds with probability (1 − 0.21)^r: 0.79³ = 0.49, a median
// of 3 rounds, at any N. What it costs: each check moves (N−1)/N² of the vector per member on
// average, so 0.21·N checks add 0.21·(N−1)/N of S per member to the average's 2(N−1)/N·S, about
// +10.5% bytes, and one more round trip to the server.

/** Expected parts checked per round, as a share of the group's members. */
export const VALIDATED_PART_SHARE = 0.21;
/**
 * An identity is on probation until this many of its parts (as owner) or recomputations (as
 * validator) were confirmed by a check: BOINC trusts a host after 10 valid results. A probationer's
 * part is drawn before anyone else's, so a new liar is caught in its first rounds. A fault starts the
 * count again however long the record before it: an identity caught once is on probation again (a
 * fixed deduction per fault would let a long honest record absorb faults).
 */
export const PROBATION_VERIFIED = 10;

export function onProbation(r: { verifiedSinceFault: number }): boolean {
  return r.verifiedSinceFault < PROBATION_VERIFIED;
}

/** A part of a group round to recompute, and the member that recomputes it (never the part's owner). */
export interface PartCheck {
  part: number;
  validator: string;
}

/**
 * The parts to validate this round, each with a validator that is not its owner: on average
 * VALIDATED_PART_SHARE of them (at least one in a group of two or more), the parts of members on
 * `probation` first, validators spread over different members where there are enough, and on another
 * network than the owner (`sameNetwork`) where there is one.
 */
export function checksFor(members: readonly string[], rand: () => number = Math.random, probation: ReadonlySet<string> = new Set(), sameNetwork?: (a: string, b: string) => boolean): PartCheck[] {
  const n = members.length;
  if (n < 2) return [];
  const expected = VALIDATED_PART_SHARE * n;
  const k = Math.min(n, Math.max(1, Math.floor(expected) + (rand() < expected - Math.floor(expected) ? 1 : 0)));
  const shuffled = shuffle([...members.keys()], rand);
  const first = (j: number) => (probation.has(members[j]) ? 0 : 1);
  const parts = shuffled.sort((a, b) => first(a) - first(b)).slice(0, k);
  const busy = new Set<string>();
  return parts.map((part) => ({ part, validator: pickValidator(members, part, busy, rand, sameNetwork) }));
}

/** A validator of `part`: a member other than its owner, of another network where there is one, not yet in `busy` where possible (then busy). */
export function pickValidator(members: readonly string[], part: number, busy: Set<string>, rand: () => number, sameNetwork?: (a: string, b: string) => boolean): string {
  const others = members.filter((_, i) => i !== part);
  const apart = sameNetwork ? others.filter((id) => !sameNetwork(id, members[part])) : others;
  const candidates = apart.length ? apart : others;
  const free = candidates.filter((id) => !busy.has(id));
  const pool = free.length ? free : candidates;
  const validator = pool[Math.floor(rand() * pool.length)];
  busy.add(validator);
  return validator;
}

function shuffle<T>(xs: T[], rand: () => number): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [xs[i], xs[j]] = [xs[j], xs[i]];
  }
  return xs;
}
