// A round in flight at a job's coordinator, as the coordinator and the group round's checks see it.
import { ProtocolError, type PartCheck, type PartValidationReport, type RoundBegin, type VolunteerEventParsed, type GroupReport } from '@tabfleet/protocol';
import type { DigestMismatch } from './group-check';
import type { Dispute } from './group-validation';
import type { GroupedSync } from './grouped-sync';

export interface RoundResult {
  checksum: string;
  metrics: VolunteerEventParsed<'round:result'>['metrics'];
  group?: GroupReport;
}

export interface ActiveRound {
  roundId: number;
  seq: number;
  mode: RoundBegin['mode'];
  members: string[];
  uploader: string | null;
  evaluators: string[];
  /** Whether the evaluators read the test set (else they report the model's checksum only: checkpoints.ts). */
  measured: boolean;
  /** Steps the job will have taken once this sync commits (the server's count, never a member's claim). */
  step: number;
  startedAt: number;
  results: Map<string, RoundResult>;
  /** Members that reported they could not finish (alive, unlike silent ones). */
  failures: Map<string, string>;
  starUpdates: Map<string, Float32Array>;
  starSent: boolean;
  /** Members removed once the round commits: their contributions were refused by most owners, or they validated falsely. */
  removeAtCommit: { member: string; reason: string }[];
  /** Group rounds being validated: the parts checked and the validators' reports so far. */
  validation: { checks: PartCheck[]; reports: Map<string, PartValidationReport[]> } | null;
  /**
   * Parts in dispute, with the members' evidence so far: a validator and the owner disagree, or (with
   * `mismatches`) the members' digests do (digest-disputes.ts).
   */
  disputes: Map<number, Dispute & { evidence: Map<string, Float32Array>; mismatches?: DigestMismatch[] }> | null;
  /** Paced jobs: the local steps each member did for this sync (the weights of its average). */
  steps: Record<string, number> | null;
  /** `auto` jobs' ring rounds at fp16 (else the job's precision). */
  dtype?: 'f16';
  /** Moshpit jobs: the sync's groups, each a ring under its own round id (`roundId` is the last of them). */
  groups: GroupedSync | null;
  /** Ring rounds by homes (home-rings.ts): round:begin's `homes`. */
  homes?: string[][] | null;
  cancelDeadline: () => void;
}

/** The round `roundId` that `volunteerId` is in, if it is `r` (a Moshpit sync: its group's, still running); else a stale_round or not_member error. */
export function roundOf(r: ActiveRound | null, volunteerId: string, roundId: number): ActiveRound {
  if (r?.groups) {
    const g = r.groups.groupIn(volunteerId, roundId);
    if (g === undefined) throw new ProtocolError(r.members.includes(volunteerId) ? 'stale_round' : 'not_member', `round ${roundId} is not ${volunteerId}'s group round`);
    if (r.groups.state[g] !== 'running') throw new ProtocolError('stale_round', `group round ${roundId} has ${r.groups.state[g]}`);
    return r;
  }
  if (!r || r.roundId !== roundId) throw new ProtocolError('stale_round', `round ${roundId} is not the current round`);
  if (!r.members.includes(volunteerId)) throw new ProtocolError('not_member', `not a member of round ${roundId}`);
  return r;
}

/**
 * A member's `unreachable` is checked against what the others saw before the next sync goes through
 * the server: a link has two ends, so when the claimant could not reach its peers they could not
 * finish either. A claim while every other member finished the exchange is refuted (it forced every
 * sync into a star round, 17 of 17, by claiming after taking part); one some other member's failure
 * bears out moves the next sync to the star path as before.
 */
export function unreachableClaims(r: ActiveRound, failed: string[]): { corroborated: boolean; refuted: string[] } {
  const claims = failed.filter((id) => r.failures.get(id)!.startsWith('unreachable'));
  const othersFinished = (id: string) => r.members.every((x) => x === id || r.results.has(x));
  const refuted = claims.filter(othersFinished);
  return { corroborated: refuted.length < claims.length, refuted };
}

/** The members `volunteerId` exchanges with in `r`: its group's in a Moshpit sync, else the round's. */
export function membersWith(r: ActiveRound, volunteerId: string): string[] {
  const g = r.groups?.groupOf(volunteerId);
  return g === undefined ? r.members : r.groups!.groups[g];
}

/** The round's evaluators as round:begin names them: off the evaluation schedule they report a checksum only. */
export function evaluatorsAsked(r: Pick<ActiveRound, 'evaluators' | 'measured'>): Pick<RoundBegin, 'evaluators' | 'checksumOnly'> {
  return { evaluators: r.evaluators, ...(r.evaluators.length && !r.measured ? { checksumOnly: true as const } : {}) };
}
