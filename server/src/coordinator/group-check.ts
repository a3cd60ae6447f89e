// The server's check of a group round (collective's group averaging) before it commits: every
// member's digests must agree with every other's, and a member whose contributions most owners
// refused is at fault.
//
// sender i's digest of the part it sent to owner j must equal j's digest of what it received from i;
// every member's digest of part j as it arrived must equal owner j's digest of its aggregate. A
// mismatch names a pair, one of whom lied or broke, but not which one: a group round's mismatches are
// settled by the server's recomputation of the parts (digest-disputes.ts). `blame` is what the
// validators' sender → validator pairs still use:
//   - a member that is in every mismatched pair, when there are at least two;
//   - otherwise every member of a mismatched pair. A liar can then take one honest member out with
//     it, one for one. (Counting pairs is how two colluding owners framed one honest sender.)
// An owner that lies consistently agrees with every digest; the validators (group-validation.ts)
// catch it.
// A refusal is an owner's word, so a sender is blamed for refused contributions only when more than
// half of the owners refused it (the others' refusals still keep its values out of their parts).
import type { GroupReport } from '@tabfleet/protocol';

export interface DigestMismatch {
  /** `contribution`: sender → owner; `aggregate`: owner → receiver; `validation`: sender → validator. */
  kind: 'contribution' | 'aggregate' | 'validation';
  from: string;
  to: string;
  part: number;
}

export interface GroupVerdict {
  mismatches: DigestMismatch[];
  /** Whom counting pairs would blame (`blame`); group rounds settle mismatches by recomputation instead. */
  liars: string[];
  /** Members whose contributions more than half of the owners refused, with the owners' reasons. */
  refused: { member: string; reasons: string[] }[];
}

/** `reports` holds one report per member of `members` (the caller checks that). */
export function checkGroup(members: readonly string[], reports: ReadonlyMap<string, GroupReport>): GroupVerdict {
  const n = members.length;
  const mismatches: DigestMismatch[] = [];
  members.forEach((owner, j) => {
    const ownerReport = reports.get(owner)!;
    members.forEach((other, i) => {
      if (i === j) return;
      const r = reports.get(other)!;
      if (r.digests.sent[j] !== ownerReport.digests.received[i]) mismatches.push({ kind: 'contribution', from: other, to: owner, part: j });
      if (r.digests.gathered[j] !== ownerReport.digests.aggregate) mismatches.push({ kind: 'aggregate', from: owner, to: other, part: j });
    });
  });
  const refusals = new Map<string, string[]>();
  for (const owner of members) {
    for (const x of reports.get(owner)!.refused) {
      if (!members.includes(x.member)) continue;
      refusals.set(x.member, [...(refusals.get(x.member) ?? []), `${owner}: ${x.reason}`]);
    }
  }
  const refused = [...refusals].filter(([, reasons]) => reasons.length * 2 > n).map(([member, reasons]) => ({ member, reasons }));
  return { mismatches, liars: blame(mismatches), refused };
}

/** Who is blamed for a set of mismatched pairs (see the header). */
export function blame(mismatches: DigestMismatch[]): string[] {
  if (mismatches.length === 0) return [];
  const inPairs = new Map<string, number>();
  for (const m of mismatches) for (const id of new Set([m.from, m.to])) inPairs.set(id, (inPairs.get(id) ?? 0) + 1);
  const inEvery = [...inPairs].filter(([, count]) => count === mismatches.length).map(([id]) => id);
  if (mismatches.length >= 2 && inEvery.length === 1) return inEvery;
  return [...inPairs.keys()];
}

/** Checks a report's shape against the round: one digest per member, refusals of members only. */
export function reportFits(members: readonly string[], report: GroupReport): string | null {
  const n = members.length;
  const { sent, received, gathered } = report.digests;
  if (sent.length !== n || received.length !== n || gathered.length !== n) return `a group report of a ${n}-member round carries ${n} digests in each list`;
  const stranger = report.refused.find((x) => !members.includes(x.member));
  if (stranger) return `refused ${stranger.member}, who is not a member of the round`;
  return null;
}
