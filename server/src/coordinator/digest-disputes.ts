// Settles a group round's digest mismatches (group-check.ts) by the server's own recomputation, not by
// counting accusers. A mismatch names a pair, one of whom lied or broke; two colluding owners that
// both reported a wrong digest for one honest sender used to make it the one member in every
// mismatched pair, and it alone was evicted (2 Sybils removed 4 honest members in 4 rounds).
//
// Every member uploads its contribution to each disputed part (its evidence, checked against the
// digest it reported sending: a member whose upload differs lied), and the server recomputes the part
// (the part's truth). Then, for each mismatched pair:
//   - sender i → owner j (j says it received other values than i says it sent): when j's aggregate is
//     the truth, j aggregated exactly what i sent, so j's receipt is a lie; otherwise it is i's word
//     against j's;
//   - owner j → receiver k (k says it gathered another aggregate than j reports): when j's aggregate is
//     the truth and k ended the round with the model (result checksum) of a third member that gathered
//     what j reports, k's receipt is a lie; when j's aggregate is not the truth and no sender disputes
//     what j received, j combined wrongly; otherwise it is word against word. (Not "k ended with the
//     group's majority model": an owner that sends every receiver the same wrong part and reports the
//     true one makes the receivers that majority, and that rule convicted them instead of it.)
// Word against word convicts a member without standing facing one with standing, and a member that
// more than half of the others' networks contradict, at least two of them (a sender that sent every
// owner other values than it reports, as a tab scaling its frames on the wire does; two colluders of
// one network against one sender are not that, nor is one member against one in a group of 2).
// Otherwise nobody is convicted, the round is not applied and both sit out the next sync (BTARD's
// rule for an unresolved accusation: the accuser pays as much as the accused).
import type { DigestMismatch } from './group-check';

export interface DigestDispute {
  part: number;
  owner: string;
  ownerAggregate: string;
  /** The mismatched pairs that involve this part. */
  mismatches: DigestMismatch[];
}

export interface DigestVerdict {
  liars: string[];
  /** Pairs neither recomputation nor standing could settle. */
  unresolved: [string, string][];
  findings: string[];
}

/** `truth` is the part's aggregate recomputed from every member's evidence (by part); `resultChecksum` a member's result checksum. */
export function settleDigestDisputes(
  disputes: readonly DigestDispute[],
  truth: ReadonlyMap<number, string>,
  resultChecksum: (id: string) => string | undefined,
  hasStanding: (id: string) => boolean,
  /** The round's members and what counts as one voice among them: a network where networks count, else the member. */
  voices: { members: readonly string[]; of: (id: string) => string },
): DigestVerdict {
  const liars = new Set<string>();
  const pairs: [string, string][] = [];
  const findings: string[] = [];
  for (const d of disputes) {
    const correct = truth.get(d.part) === d.ownerAggregate;
    const contested = d.mismatches.some((m) => m.kind === 'contribution');
    findings.push(`part ${d.part}: recomputed ${truth.get(d.part) || '(all refused)'}, owner ${d.owner} reported ${d.ownerAggregate}`);
    for (const m of d.mismatches) {
      if (m.kind === 'contribution') {
        if (correct) liars.add(m.to);
        else pairs.push([m.from, m.to]);
      } else if (m.kind === 'aggregate') {
        if (correct && endedLikeAWitness(d, m.to, voices.members, resultChecksum)) liars.add(m.to);
        else if (!correct && !contested) liars.add(m.from);
        else pairs.push([m.from, m.to]);
      }
    }
  }
  const open: [string, string][] = [];
  const seen = new Set<string>();
  for (const [a, b] of pairs) {
    const key = [a, b].sort().join('|');
    if (liars.has(a) || liars.has(b) || seen.has(key)) continue;
    seen.add(key);
    const sa = hasStanding(a), sb = hasStanding(b);
    if (sa && !sb) liars.add(b);
    else if (sb && !sa) liars.add(a);
    else open.push([a, b]);
  }
  for (const id of contradictedByMost(open, voices)) liars.add(id);
  const unresolved = open.filter(([a, b]) => !liars.has(a) && !liars.has(b));
  return { liars: [...liars], unresolved, findings };
}

/**
 * Whether `receiver` ended the round with the model of a member that is neither the part's owner nor
 * contradicts it: one that gathered the aggregate the owner reports, which the receiver then also used.
 */
function endedLikeAWitness(d: DigestDispute, receiver: string, members: readonly string[], resultChecksum: (id: string) => string | undefined): boolean {
  const contradicting = new Set(d.mismatches.filter((m) => m.kind === 'aggregate').map((m) => m.to));
  const own = resultChecksum(receiver);
  return own !== undefined && members.some((id) => id !== d.owner && !contradicting.has(id) && resultChecksum(id) === own);
}

/**
 * Members whose counterparts in `pairs` are more than half of the voices among the round's other
 * members, and at least two: one voice against one (a group of 2, or a group whose others share one
 * network) is word against word, and convicting both let one liar remove one honest member a round.
 */
function contradictedByMost(pairs: readonly [string, string][], voices: { members: readonly string[]; of: (id: string) => string }): string[] {
  const against = new Map<string, Set<string>>();
  for (const [a, b] of pairs) {
    against.set(a, (against.get(a) ?? new Set()).add(voices.of(b)));
    against.set(b, (against.get(b) ?? new Set()).add(voices.of(a)));
  }
  return [...against].filter(([id, by]) => {
    const others = new Set(voices.members.filter((m) => m !== id && voices.of(m) !== voices.of(id)).map(voices.of));
    return by.size * 2 > others.size && by.size >= 2;
  }).map(([id]) => id);
}

/** The parts a set of mismatches involves, each with its owner (members in the round's order). */
export function disputedParts(members: readonly string[], mismatches: readonly DigestMismatch[], aggregateOf: (owner: string) => string): DigestDispute[] {
  const byPart = new Map<number, DigestMismatch[]>();
  for (const m of mismatches) byPart.set(m.part, [...(byPart.get(m.part) ?? []), m]);
  return [...byPart].sort(([a], [b]) => a - b).map(([part, ms]) => ({ part, owner: members[part], ownerAggregate: aggregateOf(members[part]), mismatches: ms }));
}
