// A round in flight at a job's coordinator, as the coordinator and the group round's checks see it.
import type { PartCheck, PartValidationReport, RoundBegin, VolunteerEventParsed, GroupReport } from '@tabfleet/protocol';
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
  cancelDeadline: () => void;
}
