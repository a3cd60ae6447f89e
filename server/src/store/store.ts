// What the server persists: jobs, rounds, metrics, the checkpoint index and checkpoint bytes, and a
// few settings. SQLite (one node) and Redis (several nodes) implement it; the rest of the server
// only sees this interface.
import type { CheckpointInfo, JobSpec, JobState, MetricPoint } from '@tabfleet/protocol';

export interface JobRecord {
  id: string;
  name: string;
  spec: JobSpec;
  state: JobState;
  createdAt: number;
  updatedAt: number;
  /** Committed syncs. */
  seq: number;
  /** Optimizer steps per worker at the last committed sync. */
  step: number;
  endReason?: string;
}

export type RoundOutcome = 'running' | 'committed' | 'aborted';

export interface RoundRecord {
  jobId: string;
  roundId: number;
  seq: number;
  mode: 'ring' | 'star';
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
  /** Replaces the job's mutable fields (state, seq, step, endReason, updatedAt). */
  updateJob(job: JobRecord): Promise<void>;
  getJob(id: string): Promise<JobRecord | null>;
  listJobs(): Promise<JobRecord[]>;
  /** Inserts or replaces by (jobId, roundId). */
  saveRound(round: RoundRecord): Promise<void>;
  listRounds(jobId: string): Promise<RoundRecord[]>;
  addMetric(jobId: string, point: MetricPoint): Promise<void>;
  metrics(jobId: string, limit: number): Promise<MetricPoint[]>;
  putCheckpoint(jobId: string, info: CheckpointInfo, data: Uint8Array): Promise<void>;
  latestCheckpoint(jobId: string): Promise<CheckpointInfo | null>;
  readCheckpoint(jobId: string, seq: number): Promise<Uint8Array | null>;
  getSetting(key: string): Promise<string | null>;
  setSetting(key: string, value: string): Promise<void>;
  /** A digest of everything stored, so tests can assert that bad input changed nothing. */
  digest(): Promise<string>;
  close(): Promise<void>;
}
