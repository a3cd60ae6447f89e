// The server's random checks of a group round's owners (BTARD's validators; collective's
// Group.validate). Digests alone (group-check.ts) cannot catch an owner that combined its part
// wrongly and sent the same wrong aggregate to everyone, reporting its digest: every digest agrees.
// So once a round's digests agree, the server names a few parts and, for each, a validator that is
// not the part's owner. The members send the validator their contributions to that part; it
// recomputes the part with the owner's code and reports digests of what it received and of its
// aggregate. Then:
//   - a validator's digest of what sender i sent it must equal i's digest on record of what i sent
//     the owner; a mismatch names a pair (blamed as in group-check.ts);
//   - a validator's aggregate must equal the owner's. If not, one of the two lied, and the server
//     settles it: every member uploads its contribution to that part, each upload must match its
//     digest on record (a member whose upload does not is lying), and the server recomputes the part
//     itself with the same code. Whoever disagrees with that is removed.
//
// How many parts are checked, and what that catches and costs: protocol's validation.ts.
import { flatLengthOf, combinePart, modelDigest, QUANT_BLOCK, type GroupReport, type JobSpec, type PartCheck, type PartValidationReport } from '@tabfleet/protocol';
import { blame, type DigestMismatch } from './group-check';

/** Checks a validator's report against what it was asked: exactly its parts, one digest per member each. */
export function validationFits(members: readonly string[], checks: readonly PartCheck[], validator: string, parts: readonly PartValidationReport[]): string | null {
  const asked = checks.filter((c) => c.validator === validator).map((c) => c.part).sort((a, b) => a - b);
  const got = parts.map((p) => p.part).sort((a, b) => a - b);
  if (asked.join() !== got.join()) return `asked to validate parts [${asked.join(', ')}], reported [${got.join(', ')}]`;
  const short = parts.find((p) => p.received.length !== members.length);
  if (short) return `part ${short.part}: ${short.received.length} digests of contributions for ${members.length} members`;
  return null;
}

export interface Dispute {
  part: number;
  owner: string;
  validator: string;
  ownerAggregate: string;
  validatorAggregate: string;
}

export interface ValidationVerdict {
  /** Sender → validator pairs whose digests disagree, and whom they blame. */
  mismatches: DigestMismatch[];
  liars: string[];
  /** Parts whose validator's aggregate differs from its owner's: settled with the members' evidence. */
  disputes: Dispute[];
}

export function judgeValidations(
  members: readonly string[],
  reports: ReadonlyMap<string, GroupReport>,
  checks: readonly PartCheck[],
  validations: ReadonlyMap<string, readonly PartValidationReport[]>,
): ValidationVerdict {
  const mismatches: DigestMismatch[] = [];
  const disputes: Dispute[] = [];
  for (const c of checks) {
    const v = validations.get(c.validator)!.find((x) => x.part === c.part)!;
    members.forEach((sender, i) => {
      if (sender !== c.validator && reports.get(sender)!.digests.sent[c.part] !== v.received[i]) mismatches.push({ kind: 'validation', from: sender, to: c.validator, part: c.part });
    });
    const owner = members[c.part];
    const ownerAggregate = reports.get(owner)!.digests.aggregate;
    if (v.aggregate !== ownerAggregate) disputes.push({ part: c.part, owner, validator: c.validator, ownerAggregate, validatorAggregate: v.aggregate });
  }
  // A validator that received other values than were sent recomputed from them: its aggregate says nothing.
  return { mismatches, liars: blame(mismatches), disputes: mismatches.length ? [] : disputes };
}

/**
 * The length of a job's exchanged vector, and how its group rounds cut and combine parts: aggregates at
 * f16 under any compression, parts along the scale blocks of quantized contributions.
 */
export function partRecompute(spec: JobSpec): { length: number; block: number; f16: boolean; rule: JobSpec['aggregation']; trimFraction: number } {
  const block = spec.compression === 'int8' || spec.compression === 'e2m1' ? QUANT_BLOCK : 1;
  return { length: flatLengthOf(spec), block, f16: spec.compression !== 'none', rule: spec.aggregation, trimFraction: spec.trimFraction };
}

/** A member's uploaded contribution to a part: little-endian f32, any values (an attacker's NaN is evidence too). */
export function decodeEvidence(bytes: Uint8Array, expectedLength: number): Float32Array | string {
  if (bytes.byteLength !== expectedLength * 4) return `${bytes.byteLength} bytes where the part has ${expectedLength} f32 values`;
  const values = new Float32Array(expectedLength);
  new Uint8Array(values.buffer).set(bytes);
  return values;
}

/** The digest of a part's aggregate recomputed by the server from the members' evidence (in member order; '' when all were refused). */
export function partTruth(evidence: readonly Float32Array[], spec: JobSpec, weights?: readonly number[]): string {
  const { rule, trimFraction, f16 } = partRecompute(spec);
  const { aggregate } = combinePart(evidence, evidence[0].length, rule, { trimFraction, weights, f16 });
  return aggregate ? modelDigest(aggregate) : '';
}

/** The part's true aggregate digest from the members' evidence (in member order), and who disagreed with it. */
export function settleDispute(d: Dispute, evidence: readonly Float32Array[], spec: JobSpec, weights?: readonly number[]): { truth: string; liars: string[] } {
  const truth = partTruth(evidence, spec, weights);
  const liars = [...(d.ownerAggregate !== truth ? [d.owner] : []), ...(d.validatorAggregate !== truth ? [d.validator] : [])];
  return { truth, liars };
}
