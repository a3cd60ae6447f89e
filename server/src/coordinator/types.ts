// What a job coordinator needs from the world around it: the store, a clock, and ways to reach
// volunteers and dashboards. Injected so tests drive the round clock with fake time and so a node
// can run coordinators whose volunteers are connected to other nodes.
import type { Capabilities, Clock, DashboardServerEvents, JobSpec, VolunteerServerEvents } from '@tabfleet/protocol';
import type { ReputationRecord, Store } from '../store/store';
import type { NetworkRules } from './standing';
import type { Count } from '../metrics-catalogue';
import type { IceIssuer } from '../ice';
import type { CheckpointUploads } from '../checkpoint-uploads';

// The Clock lives in protocol (the runtime and the collective take one too); the server's is as it
// was: Date.now, and timers that never hold the process open.
export type { Clock } from '@tabfleet/protocol';
export { serverClock as realClock } from '@tabfleet/protocol';

export interface Timing {
  roundTimeoutMs: number;
  barrierTimeoutMs: number;
  loadTimeoutMs: number;
  /** The least an adaptive deadline gives (deadlines.ts; default 5 s): more where a machine's load jumps between syncs. */
  deadlineFloorMs?: number;
}

/** Emits to one volunteer or, encoded once, to several. */
export type ToVolunteer = <E extends keyof VolunteerServerEvents>(volunteerIds: string | string[], event: E, ...args: Parameters<VolunteerServerEvents[E]>) => void;
export type ToDashboards = <E extends keyof DashboardServerEvents>(jobId: string, event: E, ...args: Parameters<DashboardServerEvents[E]>) => void;

export interface CoordinatorDeps {
  store: Store;
  clock: Clock;
  timing: Timing;
  toVolunteer: ToVolunteer;
  toDashboards: ToDashboards;
  /** Whether any dashboard watches the job (the worker table is only built for watched jobs). */
  watched(jobId: string): boolean;
  /** URL from which a volunteer downloads the checkpoint of `seq` (carries a ticket). */
  checkpointUrl(jobId: string, seq: number): string;
  /** Checkpoint uploads over HTTP (absent: checkpoints come only as a Socket.IO attachment). */
  checkpointUploads?: CheckpointUploads;
  /** URL (with a ticket) of a member's data shard when the server serves the job's dataset, else null. */
  shardUrl?(jobId: string, spec: JobSpec, index: number, count: number): string | null;
  /** Counts an event for /metrics (e.g. rounds committed, outliers rejected). */
  count: Count;
  log(message: string): void;
  /** Share of a job's slots (0–1] that volunteers from one address may hold (default 1: no limit). */
  addressJobShare?: number;
  /**
   * How networks are told apart in untrusted jobs' quorums and keep-outs (standing.ts): prefix lengths,
   * or false (the default here) where every volunteer is one machine's.
   */
  networkRules?: NetworkRules;
  /** Probability per sync of replicating a unit of a member on probation, and of anyone (default protocol's REPLICATION_RATE). */
  replicationRate?: { probation: number; trusted: number };
  /** STUN and TURN servers for members' peer links, TURN with per-member credentials (absent: host candidates only). */
  ice?: IceIssuer;
}

export interface VolunteerInfo {
  volunteerId: string;
  capabilities: Capabilities;
  /** The browser's stored id (credit survives reconnects under it); absent: credit this connection. */
  clientId?: string;
  displayName?: string | null;
  /** The connection's remote address (per-address limits and keep-outs). */
  address?: string;
  /** Its identity's reputation as stored when it was offered the job (null: never seen). */
  reputation?: ReputationRecord | null;
}
