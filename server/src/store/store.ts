// What the server persists: jobs, rounds, metrics, the checkpoint index and checkpoint bytes, each
// job's contributors and penalties (keep-outs), volunteers' display names and reputations, and a few settings. SQLite (one node) and Redis (several nodes) implement it; the rest of the server
// only sees this interface.
import { ProtocolError, type CheckpointInfo, type CreditTotals, type JobSummary, type MetricPoint, type VolunteerCredit } from '@tabfleet/protocol';
import { createHash } from 'node:crypto';

/** A job's stored fields: its summary without what is live (workers) or kept elsewhere in the store. */
export type JobRecord = Omit<JobSummary, 'workers' | 'latestCheckpoint' | 'latestAccuracy'>;

/**
 * One identity's part in one job: what the server counted (syncs, samples, compute time) and what
 * the worker table shows of it once it has left. `clientId` is the browser's stored id, or the
 * connection's volunteer id when it sent none.
 */
export interface ContributorRecord extends CreditTotals {
  jobId: string;
  clientId: string;
  /** Its latest connection, and what that tab last reported. */
  volunteerId: string;
  adapter: string;
  backend: 'webgpu' | 'cpu';
  step: number;
  bytesSent: number;
  bytesReceived: number;
  firstAt: number;
  lastAt: number;
  /** Why it left the job; null while it is a member. */
  leftReason: string | null;
}

/**
 * What the server knows of one identity across every job it took part in: how much of its work a
 * check confirmed (a part it owned or recomputed as a validator that agreed), and its faults.
 */
export interface ReputationRecord {
  clientId: string;
  verified: number;
  /** Confirmations since its last fault (all of them if it has none): what ends probation. */
  verifiedSinceFault: number;
  faults: number;
  lastFault: string | null;
  lastFaultAt: number | null;
}

/**
 * A change to a reputation: added to what is stored (several jobs may add to one identity at once);
 * a fault also sets `verifiedSinceFault` back to 0.
 */
export interface ReputationChange {
  verified?: number;
  fault?: { reason: string; at: number };
}

/**
 * One of a job's penalty records (coordinator/penalties.ts), by (kind, key): an identity's faults
 * (`identity`) or departures mid-round (`departure`), a network's integrity faults (`network`), or how
 * long newcomers from a network wait (`newcomers`, `offences` 0). Both fields only grow, so of two
 * versions of a record the one with more offences (then the later `until`) is the newer.
 */
export interface PenaltyRecord {
  kind: 'identity' | 'departure' | 'network' | 'newcomers';
  /** The identity (client id) or the network (address or prefix). */
  key: string;
  offences: number;
  /** Epoch ms until which it is kept out (0: not kept out yet). */
  until: number;
  /** The last fault's reason. */
  reason: string;
}

/** Whether `a` is newer than `b` (more offences, then a later keep-out): what a store keeps of two writes of one record. */
export function newerPenalty(a: Pick<PenaltyRecord, 'offences' | 'until'>, b: Pick<PenaltyRecord, 'offences' | 'until'>): boolean {
  return a.offences > b.offences || (a.offences === b.offences && a.until > b.until);
}

export type RoundOutcome = 'running' | 'committed' | 'aborted';

export interface RoundRecord {
  jobId: string;
  roundId: number;
  seq: number;
  mode: 'ring' | 'group' | 'star';
  members: string[];
  outcome: RoundOutcome;
  startedAt: number;
  endedAt: number | null;
  /** Why it was aborted, or the parameters' checksum when it committed. */
  detail: string;
}

export interface Store {
  readonly kind: 'sqlite' | 'redis';
  createJob(job: JobRecord): Promise<void>;
  /** Replaces the job's mutable fields (state, seq, step, endReason, notice, updatedAt). */
  updateJob(job: JobRecord): Promise<void>;
  getJob(id: string): Promise<JobRecord | null>;
  listJobs(): Promise<JobRecord[]>;
  /** Inserts or replaces by (jobId, roundId). */
  saveRound(round: RoundRecord): Promise<void>;
  listRounds(jobId: string): Promise<RoundRecord[]>;
  /** Inserts or replaces by (jobId, seq, kind): a sync re-committed after a restart keeps one row. */
  addMetric(jobId: string, point: MetricPoint): Promise<void>;
  /** The latest `limit` points, oldest first. */
  metrics(jobId: string, limit: number): Promise<MetricPoint[]>;
  /** Points in the order they were first stored, from `cursor` (0 at the start); `next` is null after the last page. */
  metricsPage(jobId: string, cursor: number, limit: number): Promise<{ points: MetricPoint[]; next: number | null }>;
  putCheckpoint(jobId: string, info: CheckpointInfo, data: Uint8Array): Promise<void>;
  /** As putCheckpoint, from a file under the data directory (an HTTP upload's), which the store takes over. */
  putCheckpointFile(jobId: string, info: CheckpointInfo, file: string): Promise<void>;
  /** Where a stored checkpoint's bytes lie on disk, for ranged downloads (absent: the store holds them elsewhere). */
  checkpointFile?(jobId: string, seq: number): Promise<{ path: string; info: CheckpointInfo } | null>;
  /** A stored checkpoint read by ranges, never whole (a store without files: Redis); its bytes are checked against their sha256 first. */
  checkpointRanges?(jobId: string, seq: number): Promise<CheckpointRanges | null>;
  latestCheckpoint(jobId: string): Promise<CheckpointInfo | null>;
  /** The bytes of a stored checkpoint; throws CorruptCheckpointError when they no longer match their sha256. */
  readCheckpoint(jobId: string, seq: number): Promise<Uint8Array | null>;
  /** Test accuracy of the latest sync evaluated (by sync, not by when its evaluation was recorded). */
  latestAccuracy(jobId: string): Promise<number | null>;
  /** Inserts or replaces by (jobId, clientId); one call is one write (a transaction in SQLite). */
  saveContributors(records: ContributorRecord[]): Promise<void>;
  /** A job's contributors, first to join first. */
  contributors(jobId: string): Promise<ContributorRecord[]>;
  /** Totals over every job, or null when the id never contributed and has no name. */
  volunteerCredit(clientId: string): Promise<VolunteerCredit | null>;
  /** Display names by client id (ids without one are absent). */
  displayNames(clientIds: string[]): Promise<Map<string, string>>;
  /**
   * Sets (null: clears) an id's display name. Names of ids with no committed sync yet are kept for at
   * most `maxUnprovenNames` ids (MAX_UNPROVEN_NAMES): past that, the least recently set are deleted.
   */
  setDisplayName(clientId: string, name: string | null): Promise<void>;
  /** Reputations by client id (ids never seen are absent). */
  reputations(clientIds: string[]): Promise<Map<string, ReputationRecord>>;
  /** Adds to an identity's reputation atomically. */
  addReputation(clientId: string, change: ReputationChange): Promise<void>;
  /** A job's penalty records, in no particular order. */
  penalties(jobId: string): Promise<PenaltyRecord[]>;
  /**
   * Stores penalty records of a job in one write, each by (jobId, kind, key), unless the stored one is
   * newer (`newerPenalty`): a late write from a node that lost the job never undoes the new owner's.
   */
  savePenalties(jobId: string, records: PenaltyRecord[]): Promise<void>;
  getSetting(key: string): Promise<string | null>;
  setSetting(key: string, value: string): Promise<void>;
  /** A digest of everything stored, so tests can assert that bad input changed nothing. */
  digest(): Promise<string>;
  close(): Promise<void>;
}

/**
 * Display names kept for client ids that have not yet been a member of a committed sync. A name costs
 * nothing to set, so these are bounded: 10,000 names of at most 40 characters are well under a MiB,
 * and more than any node sees arrive before their first sync. An id with a committed sync keeps its
 * name (those are bounded by the work it took to earn them).
 */
export const MAX_UNPROVEN_NAMES = 10_000;

/** A metric point is either a sync's (bytes on the wire) or an evaluation's; each is stored once per sync. */
export function metricKind(p: MetricPoint): 'sync' | 'eval' {
  return p.bytesSent === null ? 'eval' : 'sync';
}

/**
 * Which checkpoints are kept: the latest `keepLatest`, and every `keepEvery`th sync (0: none of the
 * older ones). The others are deleted when a new one is stored.
 */
export interface CheckpointRetention {
  keepLatest: number;
  keepEvery: number;
}

export const DEFAULT_CHECKPOINT_RETENTION: CheckpointRetention = { keepLatest: 5, keepEvery: 50 };

/** The syncs among `seqs` that `rule` no longer keeps. */
export function checkpointsToPrune(seqs: number[], rule: CheckpointRetention): number[] {
  const newestFirst = [...seqs].sort((a, b) => b - a);
  return newestFirst.slice(Math.max(1, rule.keepLatest)).filter((s) => !(rule.keepEvery > 0 && s % rule.keepEvery === 0));
}

/** A stored checkpoint's record and its bytes `start`–`end` (inclusive), in parts. */
export interface CheckpointRanges {
  info: CheckpointInfo;
  read(start: number, end: number): AsyncIterable<Uint8Array>;
}

export class CorruptCheckpointError extends ProtocolError {
  constructor(jobId: string, seq: number) {
    super('internal', `checkpoint of sync ${seq} of job ${jobId} is corrupted on disk (sha256 mismatch); not served`);
  }
}

/** Returns `bytes` when their sha256 is `expected`, else throws CorruptCheckpointError. */
export function verifiedCheckpoint(jobId: string, seq: number, bytes: Uint8Array, expected: string): Uint8Array {
  if (createHash('sha256').update(bytes).digest('hex') !== expected) throw new CorruptCheckpointError(jobId, seq);
  return bytes;
}
