// The volunteer runtime's surface (runtime.ts): the engine calls it makes, what it reports to the
// page, what it is built with, and why a tab may be held out of its job.
import type { Signaler, Transport } from '@tabfleet/collective';
import type { LocalWork, Payload } from '@tabfleet/distributed';
import type { Assignment, Clock, IceServer, ReplicaTask, ReplicaUnit } from '@tabfleet/protocol';
import type { Socket } from 'socket.io-client';
import type { JobEngineInfo, SyncOf } from './job-engine';

/** The engine calls the runtime makes: a JobEngine, or its comlink proxy in the Web Worker. */
export interface EngineLike {
  setup(assignment: Assignment, serverUrl: string): Promise<JobEngineInfo>;
  loadModel(url: string | null, step: number): Promise<{ digest: string }>;
  /** Stops a loadModel download under way (it rejects): the server sent a newer model. */
  abandonModelLoad?(): void | Promise<void>;
  /** Bytes downloaded for the job so far (the heartbeat shows the server a load that is moving). */
  downloadedBytes?(): number | Promise<number>;
  /** A checkpoint a member sent (its digest checked first), loaded as loadModel does. */
  loadCheckpoint(bytes: Uint8Array, step: number): Promise<{ digest: string }>;
  /** The model of the last commit as a checkpoint, for a joiner that asked this member (throws while it changes). */
  servedCheckpoint(step: number): Promise<Uint8Array>;
  /** `steps` local steps (paced jobs), else the job's H; with `budgetMs`, until the budget is spent (see pacedStepCeiling). */
  local(steps?: number, budgetMs?: number): Promise<LocalWork>;
  payload(of?: SyncOf): Promise<Payload>;
  prepare(mean: Float32Array, of?: SyncOf): Promise<string>;
  commit(): Promise<void>;
  discard(): void | Promise<void>;
  currentStep(): number | Promise<number>;
  checkpoint(): Promise<Uint8Array>;
  evaluate(limit?: number): Promise<{ accuracy: number; loss: number; count: number }>;
  /** checkpointDigest of the global model and its strategy state as they are now. */
  digest(): Promise<string>;
  /** Redundant recompute: this sync's local work as the given unit; the delta so far; another member's unit recomputed. */
  localUnit(unit: ReplicaUnit): Promise<LocalWork>;
  unitDelta(): Promise<Float32Array>;
  replicate(task: ReplicaTask): Promise<Float32Array>;
}

/**
 * Why a tab is out of its job without having stopped: the volunteer paused it, the browser froze the
 * page, the device runs on battery, or the GPU device was lost and is being recreated. The tab leaves
 * the job at once (the server re-forms without waiting for a timeout) and rejoins when no hold is left.
 */
export type HoldReason = 'paused' | 'frozen' | 'on battery' | 'gpu lost';

export interface RuntimeStatus {
  /** `paused`: out of the job for the reasons in `held`; `recovering`: recreating a lost GPU device. */
  state: 'connecting' | 'idle' | 'loading' | 'training' | 'syncing' | 'paused' | 'recovering' | 'stopped';
  held: HoldReason[];
  /** The page is hidden (a background tab): the browser may throttle its timers or freeze it. */
  hidden: boolean;
  volunteerId: string | null;
  jobId: string | null;
  step: number;
  seq: number;
  roundId: number | null;
  peers: string[];
  samplesPerSec: number;
  bytesSent: number;
  bytesReceived: number;
  syncs: number;
  lastError: string | null;
  lastAccuracy: number | null;
  /** How this tab runs a step of its job: examples per pass, recompute, and why. */
  memoryPlan: string | null;
  /** While it loads: the bytes downloaded for the job so far, as the last heartbeat read them. */
  downloadedBytes: number | null;
}

export interface RuntimeOptions {
  socket: Socket;
  serverUrl: string;
  engine: EngineLike;
  /**
   * Builds this volunteer's transport once the server has named it. `iceServers` reads the STUN and
   * TURN servers the server gave this tab (with its job, renewed by `ice:refresh`) as each link opens.
   */
  createTransport(volunteerId: string, signaler: Signaler, iceServers: () => IceServer[]): Transport;
  /** Ask for this job rather than the one that needs workers most. */
  jobId?: string;
  log?: (line: string) => void;
  onStatus?: (s: RuntimeStatus) => void;
  /** Pause between local steps (the page's "how hard" slider), ms per sync. */
  throttleMs?: () => number;
  /** After a work request failed for a passing reason, ask again this much later (default WORK_REQUEST_RETRY_MS). */
  workRetryMs?: number;
  /** Pacing, deadlines, retries and the heartbeat run on it (default realClock; tests pass a FakeClock). */
  clock?: Clock;
  /** How long a join probe may take, links included (default JOIN_PROBE_TIMEOUT_MS). */
  joinProbeTimeoutMs?: number;
}
