// The round clock of one job. Members go loading → admitted (holding the global model of the last
// committed sync and training locally) → ready (at the barrier for the next sync). When every admitted
// member is ready the coordinator begins a round (ring order, deadline, quorum); members report their
// result without applying it, and the round commits when all have reported. A member lost mid-round
// aborts the round and it is re-formed at once with the survivors, who still hold their local progress.
// All state changes are synchronous; persistence is queued behind them in order.
import {
  PRESET_FLAT_LENGTHS,
  ProtocolError,
  decodeSafetensors,
  f32Values,
  targetStepsOf,
  type Assignment,
  type CheckpointInfo,
  type JobSummary,
  type MetricPoint,
  type VolunteerEventName,
  type VolunteerEventParsed,
  type WorkerRow,
} from '@tabfleet/protocol';
import { createHash } from 'node:crypto';
import { contributorName, departedRow } from '../credit';
import type { ContributorRecord, JobRecord, RoundRecord } from '../store/store';
import { aggregate, decodeUpdate, rejectOutliers } from './aggregate';
import type { CoordinatorDeps, VolunteerInfo } from './types';

type Phase = 'loading' | 'admitted' | 'ready';

interface Member extends VolunteerInfo {
  shard: number;
  phase: Phase;
  /** The sync whose model it was told to load (null: waiting for a checkpoint to exist). */
  loadSeq: number | null;
  readyStep: number;
  cancelLoadTimer: (() => void) | null;
  status: { state: string; step: number; samplesPerSec: number; bytesSent: number; bytesReceived: number };
  lastRound: number | null;
  lastRoundMs: number | null;
  /** Whom its work is credited to: its client id, or its volunteer id when it sent none. */
  identity: string;
  /** When it was last handed work (admitted, or a sync committed), and how long it took to be ready. */
  workSince: number;
  workMs: number;
}

interface RoundResult {
  checksum: string;
  step: number;
  metrics: VolunteerEventParsed<'round:result'>['metrics'];
}

interface ActiveRound {
  roundId: number;
  seq: number;
  mode: 'ring' | 'star';
  members: string[];
  uploader: string | null;
  startedAt: number;
  results: Map<string, RoundResult>;
  /** Members that reported they could not finish (alive, unlike silent ones). */
  failures: Map<string, string>;
  starUpdates: Map<string, Float32Array>;
  starSent: boolean;
  cancelDeadline: () => void;
}

/** A checkpoint for the just-committed sync that the uploader still owes. */
interface PendingUpload {
  seq: number;
  uploader: string;
  cancelTimer: () => void;
}

/** Ring failures within one sync before that sync falls back to the star (server) path. */
const RING_FAILURES_BEFORE_STAR = 2;
/** Dashboards get the worker table at most this often. */
const WORKER_TABLE_INTERVAL_MS = 500;
/** Contributor totals are written at most this often (one batched write, not one per member per sync). */
const CONTRIBUTORS_FLUSH_MS = 1_000;

export class JobCoordinator {
  private readonly members = new Map<string, Member>();
  private round: ActiveRound | null = null;
  private pendingUpload: PendingUpload | null = null;
  private nextRoundId: number;
  private latestCheckpoint: CheckpointInfo | null;
  private ringFailures = 0;
  private starNext = false;
  /** Stop after the next committed sync that leaves a checkpoint (target accuracy reached). */
  private finishing = false;
  private accuracyReported = new Set<number>();
  private cancelBarrier: (() => void) | null = null;
  private workerTableTimer: (() => void) | null = null;
  private persistQueue: Promise<void> = Promise.resolve();
  private latestAccuracy: number | null = null;
  /** Everyone who has been in the job, by identity (loaded from the store, kept in step with it). */
  private readonly contributors = new Map<string, ContributorRecord>();
  private readonly names = new Map<string, string>();
  private readonly dirtyContributors = new Set<string>();
  private cancelContributorsFlush: (() => void) | null = null;

  private constructor(
    private job: JobRecord,
    private readonly deps: CoordinatorDeps,
    lastRoundId: number,
    latestCheckpoint: CheckpointInfo | null,
  ) {
    this.nextRoundId = lastRoundId + 1;
    this.latestCheckpoint = latestCheckpoint;
  }

  /**
   * Loads a job from the store. A job that was running resumes from its latest checkpoint: rounds
   * committed after it lived only in the volunteers, who reconnect and load that checkpoint.
   */
  static async load(job: JobRecord, deps: CoordinatorDeps): Promise<JobCoordinator> {
    const rounds = await deps.store.listRounds(job.id);
    const checkpoint = await deps.store.latestCheckpoint(job.id);
    const resumed = { ...job, seq: checkpoint?.seq ?? 0, step: checkpoint?.step ?? 0, updatedAt: deps.clock.now() };
    const c = new JobCoordinator(resumed, deps, rounds.reduce((m, r) => Math.max(m, r.roundId), 0), checkpoint);
    c.latestAccuracy = await deps.store.latestAccuracy(job.id);
    const contributors = await deps.store.contributors(job.id);
    for (const [id, name] of await deps.store.displayNames(contributors.map((x) => x.clientId))) c.names.set(id, name);
    // Members when the server stopped are not members now; they rejoin under the same identity.
    for (const x of contributors) c.contributors.set(x.clientId, { ...x, leftReason: x.leftReason ?? 'server restarted' });
    for (const r of rounds.filter((r) => r.outcome === 'running')) {
      c.persist(() => deps.store.saveRound({ ...r, outcome: 'aborted', endedAt: deps.clock.now(), detail: 'server restarted' }));
    }
    if (resumed.seq !== job.seq || resumed.step !== job.step) {
      deps.log(`job ${job.id}: resuming from checkpoint of sync ${resumed.seq} (step ${resumed.step}); sync ${job.seq} was the last committed`);
      c.persist(() => deps.store.updateJob(c.job));
    }
    return c;
  }

  get id(): string {
    return this.job.id;
  }

  get ended(): boolean {
    return this.job.state === 'done' || this.job.state === 'stopped' || this.job.state === 'failed';
  }

  get workerCount(): number {
    return this.members.size;
  }

  hasMember(volunteerId: string): boolean {
    return this.members.has(volunteerId);
  }

  /** Whether this job could take the volunteer (used by the scheduler to rank jobs). */
  accepts(v: VolunteerInfo): boolean {
    return !this.ended && this.members.size < this.job.spec.maxWorkers && this.fits(v);
  }

  summary(): JobSummary {
    return {
      id: this.job.id, name: this.job.name, spec: this.job.spec, state: this.job.state, createdAt: this.job.createdAt,
      updatedAt: this.job.updatedAt, seq: this.job.seq, step: this.job.step, workers: this.members.size,
      latestCheckpoint: this.latestCheckpoint, latestAccuracy: this.latestAccuracy, ...(this.job.endReason ? { endReason: this.job.endReason } : {}),
    };
  }

  /** The members, then everyone who contributed and is no longer in the job (state `left`). */
  workers(): WorkerRow[] {
    const live = [...this.members.values()].map((m) => ({
      volunteerId: m.volunteerId, jobId: this.job.id, state: m.status.state, contributor: contributorName(m.identity, this.names.get(m.identity)),
      syncs: this.contributors.get(m.identity)?.syncs ?? 0, adapter: describeAdapter(m), backend: m.capabilities.backend,
      step: m.status.step, samplesPerSec: m.status.samplesPerSec, bytesSent: m.status.bytesSent, bytesReceived: m.status.bytesReceived,
      lastRound: m.lastRound, lastRoundMs: m.lastRoundMs, admitted: m.phase !== 'loading',
    }));
    const present = new Set([...this.members.values()].map((m) => m.identity));
    const departed = [...this.contributors.values()].filter((c) => !present.has(c.clientId)).map((c) => departedRow(c, this.names.get(c.clientId)));
    return [...live, ...departed];
  }

  /** Waits until everything queued so far (contributor totals included) is in the store. */
  flushed(): Promise<void> {
    this.flushContributors();
    return this.persistQueue;
  }

  // ---------- membership ----------

  join(v: VolunteerInfo): Assignment {
    if (this.ended) throw new ProtocolError('conflict', `job ${this.job.id} has ended (${this.job.state})`);
    if (this.members.has(v.volunteerId)) throw new ProtocolError('conflict', `already a member of job ${this.job.id}`);
    if (this.members.size >= this.job.spec.maxWorkers) throw new ProtocolError('capacity', `job ${this.job.id} has its ${this.job.spec.maxWorkers} workers`);
    if (!this.fits(v)) throw new ProtocolError('capacity', `this adapter cannot hold the ${this.job.spec.preset} model`);
    const used = new Set([...this.members.values()].map((m) => m.shard));
    let shard = 0;
    while (used.has(shard)) shard++;
    const identity = v.clientId ?? v.volunteerId;
    const member: Member = {
      ...v, shard, phase: 'loading', loadSeq: null, readyStep: 0, cancelLoadTimer: null, lastRound: null, lastRoundMs: null,
      status: { state: 'loading', step: 0, samplesPerSec: 0, bytesSent: 0, bytesReceived: 0 }, identity, workSince: this.deps.clock.now(), workMs: 0,
    };
    this.members.set(v.volunteerId, member);
    this.joinedContributor(member);
    const assignment: Assignment = { job: { id: this.job.id, spec: this.job.spec }, shard: { index: shard, count: this.job.spec.maxWorkers } };
    const dataUrl = this.deps.shardUrl?.(this.job.id, this.job.spec, shard, this.job.spec.maxWorkers);
    if (dataUrl) assignment.dataUrl = dataUrl;
    this.deps.toVolunteer(v.volunteerId, 'job:assign', assignment);
    // The model it can load now: the seed (nothing committed yet) or a checkpoint of the last sync,
    // unless a round is under way (its commit would make that model stale before the joiner is in).
    if (!this.round && this.job.seq === 0) this.sendLoad(member, 0);
    else if (!this.round && this.latestCheckpoint?.seq === this.job.seq) this.sendLoad(member, this.job.seq);
    this.changedWorkers();
    this.tryBegin();
    return assignment;
  }

  /** A member left (disconnect, leave). Aborts its round; the survivors re-form at once. */
  leave(volunteerId: string, reason: string): void {
    this.removeMember(volunteerId, reason);
    this.tryBegin();
  }

  private removeMember(volunteerId: string, reason: string): void {
    const m = this.members.get(volunteerId);
    if (!m) return;
    m.cancelLoadTimer?.();
    this.members.delete(volunteerId);
    this.departedContributor(m, reason);
    this.deps.log(`job ${this.job.id}: ${volunteerId} left (${reason})`);
    if (this.pendingUpload?.uploader === volunteerId) this.dropPendingUpload();
    if (this.round?.members.includes(volunteerId)) this.abortRound(`member ${volunteerId} lost: ${reason}`, [volunteerId]);
    this.changedWorkers();
  }

  /** Removes a member that is still connected but failed the job's timing; the caller re-forms. */
  private evict(volunteerId: string, reason: string): void {
    if (!this.members.has(volunteerId)) return;
    this.deps.toVolunteer(volunteerId, 'job:end', { jobId: this.job.id, reason });
    this.removeMember(volunteerId, reason);
  }

  /**
   * This node lets go of the job (shutdown, or another node took it over): its timers stop and
   * nothing more is sent; the job stays as stored, for whichever node loads it next.
   */
  release(): void {
    this.round?.cancelDeadline();
    this.cancelBarrier?.();
    this.cancelBarrier = null;
    this.pendingUpload?.cancelTimer();
    this.workerTableTimer?.();
    this.workerTableTimer = null;
    for (const m of this.members.values()) m.cancelLoadTimer?.();
  }

  stop(reason: string, state: 'stopped' | 'done' | 'failed' = 'stopped'): void {
    if (this.ended) throw new ProtocolError('conflict', `job ${this.job.id} has already ended (${this.job.state})`);
    if (this.round) this.abortRound(reason, []);
    this.cancelBarrier?.();
    this.dropPendingUpload();
    this.job = { ...this.job, state, endReason: reason, updatedAt: this.deps.clock.now() };
    this.persist(() => this.deps.store.updateJob(this.job));
    const leaving = [...this.members.values()];
    this.members.clear();
    for (const m of leaving) {
      m.cancelLoadTimer?.();
      this.departedContributor(m, `job ${state}`);
      this.deps.toVolunteer(m.volunteerId, 'job:end', { jobId: this.job.id, reason });
    }
    this.flushContributors();
    this.deps.log(`job ${this.job.id}: ${state} (${reason})`);
    this.deps.toDashboards(this.job.id, 'job:update', this.summary());
    this.changedWorkers();
  }

  // ---------- events from members ----------

  handle<E extends VolunteerEventName>(volunteerId: string, event: E, payload: VolunteerEventParsed<E>): object {
    const m = this.members.get(volunteerId);
    if (!m) throw new ProtocolError('not_member', `not a member of job ${this.job.id}`);
    switch (event) {
      case 'model:loaded': return this.onModelLoaded(m, payload as VolunteerEventParsed<'model:loaded'>);
      case 'round:ready': return this.onReady(m, payload as VolunteerEventParsed<'round:ready'>);
      case 'round:result': return this.onResult(m, payload as VolunteerEventParsed<'round:result'>);
      case 'round:failed': return this.onFailed(m, payload as VolunteerEventParsed<'round:failed'>);
      case 'signal': return this.onSignal(m, payload as VolunteerEventParsed<'signal'>);
      case 'star:update': return this.onStarUpdate(m, payload as VolunteerEventParsed<'star:update'>);
      case 'checkpoint:upload': return this.onUpload(m, payload as VolunteerEventParsed<'checkpoint:upload'>);
      case 'metrics': return this.onMetrics(payload as VolunteerEventParsed<'metrics'>);
      default: throw new ProtocolError('unknown_event', `${event} is not a job event`);
    }
  }

  /** Heartbeat status; no job state changes. */
  status(volunteerId: string, status: Member['status']): void {
    const m = this.members.get(volunteerId);
    if (!m) return;
    m.status = status;
    const c = this.contributors.get(m.identity);
    if (c && c.volunteerId === volunteerId) {
      Object.assign(c, { step: status.step, bytesSent: status.bytesSent, bytesReceived: status.bytesReceived });
      this.markContributor(m.identity);
    }
    this.changedWorkers();
  }

  private onModelLoaded(m: Member, e: VolunteerEventParsed<'model:loaded'>): object {
    if (m.phase !== 'loading' || m.loadSeq !== e.seq) throw new ProtocolError('stale_round', `was not asked to load the model of sync ${e.seq}`);
    m.cancelLoadTimer?.();
    m.cancelLoadTimer = null;
    if (e.seq !== this.job.seq) {
      // A sync committed while it loaded; it needs the newer model.
      m.loadSeq = null;
      if (this.latestCheckpoint?.seq === this.job.seq && !this.round) this.sendLoad(m, this.job.seq);
      return { admitted: false };
    }
    m.phase = 'admitted';
    m.workSince = this.deps.clock.now();
    m.status.state = 'training';
    this.changedWorkers();
    this.tryBegin();
    return { admitted: true };
  }

  private onReady(m: Member, e: VolunteerEventParsed<'round:ready'>): object {
    if (m.phase === 'loading') throw new ProtocolError('conflict', 'not admitted yet: load the global model first');
    if (e.seq !== this.job.seq + 1) throw new ProtocolError('stale_round', `the next sync is ${this.job.seq + 1}, not ${e.seq}`);
    if (m.phase === 'ready') return { waiting: true };
    m.phase = 'ready';
    m.readyStep = e.step;
    // Time on the job's work as the server sees it; a member slower than the barrier is evicted anyway.
    m.workMs = Math.min(this.deps.clock.now() - m.workSince, this.deps.timing.barrierTimeoutMs);
    this.tryBegin();
    return { waiting: this.round === null };
  }

  private currentRound(m: Member, roundId: number): ActiveRound {
    const r = this.round;
    if (!r || r.roundId !== roundId) throw new ProtocolError('stale_round', `round ${roundId} is not the current round`);
    if (!r.members.includes(m.volunteerId)) throw new ProtocolError('not_member', `not a member of round ${roundId}`);
    return r;
  }

  private onResult(m: Member, e: VolunteerEventParsed<'round:result'>): object {
    const r = this.currentRound(m, e.roundId);
    if (r.mode === 'star' && !r.starSent) throw new ProtocolError('conflict', 'the star result has not been sent yet');
    if (r.results.has(m.volunteerId)) return { duplicate: true };
    r.results.set(m.volunteerId, { checksum: e.checksum, step: e.step, metrics: e.metrics });
    if (r.results.size === r.members.length) this.commit(r);
    return {};
  }

  /**
   * A member could not finish. The round is re-formed once every member has answered (result or
   * failure), or at the deadline, when members that stayed silent are evicted.
   */
  private onFailed(m: Member, e: VolunteerEventParsed<'round:failed'>): object {
    const r = this.currentRound(m, e.roundId);
    if (r.failures.has(m.volunteerId)) return { duplicate: true };
    r.failures.set(m.volunteerId, `${e.code}${e.message ? `: ${e.message}` : ''}`);
    if (e.code === 'unreachable') this.starNext = true;
    if (e.code === 'device_lost') {
      this.evict(m.volunteerId, 'GPU device lost');
      this.tryBegin();
      return {};
    }
    if (r.failures.size + [...r.results.keys()].filter((id) => !r.failures.has(id)).length === r.members.length) {
      if (r.mode === 'ring') this.ringFailures++;
      this.abortRound(`failed: ${[...r.failures].map(([id, why]) => `${id} ${why}`).join('; ')}`, []);
      this.tryBegin();
    }
    return {};
  }

  private onSignal(m: Member, e: VolunteerEventParsed<'signal'>): object {
    const r = this.currentRound(m, e.roundId);
    if (r.mode !== 'ring' || !ringNeighbours(r.members, m.volunteerId).includes(e.to)) {
      throw new ProtocolError('not_neighbour', `${e.to} is not a ring neighbour of ${m.volunteerId} in round ${r.roundId}`);
    }
    this.deps.toVolunteer(e.to, 'signal', { jobId: this.job.id, roundId: r.roundId, from: m.volunteerId, data: e.data });
    return {};
  }

  private onStarUpdate(m: Member, e: VolunteerEventParsed<'star:update'>): object {
    const r = this.currentRound(m, e.roundId);
    if (r.mode !== 'star') throw new ProtocolError('conflict', `round ${r.roundId} is a ring round`);
    if (r.starUpdates.has(m.volunteerId)) throw new ProtocolError('conflict', 'update already received for this round');
    r.starUpdates.set(m.volunteerId, decodeUpdate(e.data, PRESET_FLAT_LENGTHS[this.job.spec.preset]));
    if (r.starUpdates.size === r.members.length) this.sendStarResult(r);
    return {};
  }

  private onUpload(m: Member, e: VolunteerEventParsed<'checkpoint:upload'>): object {
    const p = this.pendingUpload;
    if (!p || p.uploader !== m.volunteerId || p.seq !== e.seq) throw new ProtocolError('conflict', `no checkpoint of sync ${e.seq} was asked of this member`);
    try {
      const { tensors } = decodeSafetensors(e.data);
      if (Object.keys(tensors).length === 0) throw new ProtocolError('bad_tensor', 'checkpoint holds no tensors');
      for (const [name, t] of Object.entries(tensors)) {
        if (t.dtype === 'F32' && !f32Values(t).every(Number.isFinite)) throw new ProtocolError('bad_tensor', `checkpoint tensor ${name} has non-finite values`);
      }
    } catch (err) {
      if (err instanceof ProtocolError) throw err;
      throw new ProtocolError('bad_tensor', `checkpoint is not valid safetensors: ${(err as Error).message}`);
    }
    p.cancelTimer();
    this.pendingUpload = null;
    const info = { seq: e.seq, step: this.job.step, bytes: e.data.byteLength, sha256: createHash('sha256').update(e.data).digest('hex'), createdAt: this.deps.clock.now() };
    const data = e.data.slice();
    this.persist(async () => {
      await this.deps.store.putCheckpoint(this.job.id, info, data);
      this.checkpointStored(info);
    });
    return { bytes: info.bytes };
  }

  private onMetrics(e: VolunteerEventParsed<'metrics'>): object {
    if (e.seq > this.job.seq) throw new ProtocolError('stale_round', `sync ${e.seq} has not been committed`);
    if (this.accuracyReported.has(e.seq)) return { duplicate: true };
    this.accuracyReported.add(e.seq);
    if (e.accuracy !== null) this.latestAccuracy = e.accuracy;
    const point: MetricPoint = { seq: e.seq, step: this.job.step, time: this.deps.clock.now(), loss: e.loss, accuracy: e.accuracy, samplesPerSec: null, bytesSent: null, workers: this.members.size };
    this.persist(() => this.deps.store.addMetric(this.job.id, point));
    this.deps.toDashboards(this.job.id, 'job:metrics', { jobId: this.job.id, points: [point] });
    const target = this.job.spec.targetAccuracy;
    if (target !== undefined && e.accuracy !== null && e.accuracy >= target && !this.finishing) {
      this.deps.log(`job ${this.job.id}: test accuracy ${e.accuracy} reached the target ${target}`);
      this.finishing = true;
      if (this.latestCheckpoint?.seq === this.job.seq && !this.pendingUpload) this.stop(`reached target accuracy ${target}`, 'done');
    }
    return {};
  }

  // ---------- the round clock ----------

  private tryBegin(): void {
    if (this.ended || this.round || this.pendingUpload) return;
    this.resumeIfOrphaned();
    const all = [...this.members.values()];
    if (all.some((m) => m.phase === 'loading' && m.loadSeq !== null)) return; // a joiner is loading: hold the barrier
    const admitted = all.filter((m) => m.phase !== 'loading');
    if (admitted.length < this.job.spec.minWorkers) return;
    if (admitted.some((m) => m.phase !== 'ready')) {
      if (admitted.some((m) => m.phase === 'ready') && !this.cancelBarrier) {
        this.cancelBarrier = this.deps.clock.after(this.deps.timing.barrierTimeoutMs, () => this.barrierExpired());
      }
      return;
    }
    this.cancelBarrier?.();
    this.cancelBarrier = null;
    this.begin(admitted.sort((a, b) => a.shard - b.shard));
  }

  /**
   * With no admitted member left, the global model of the last sync is gone with them: the job goes
   * back to its latest checkpoint (or the seed) and waiting joiners load that.
   */
  private resumeIfOrphaned(): void {
    const members = [...this.members.values()];
    if (members.length === 0 || members.some((m) => m.phase !== 'loading')) return;
    const seq = this.latestCheckpoint?.seq ?? 0;
    if (seq !== this.job.seq) {
      this.deps.log(`job ${this.job.id}: every member that held sync ${this.job.seq} left; going back to ${seq ? `the checkpoint of sync ${seq}` : 'the initial model'}`);
      this.job = { ...this.job, seq, step: this.latestCheckpoint?.step ?? 0, updatedAt: this.deps.clock.now() };
      this.persist(() => this.deps.store.updateJob(this.job));
    }
    for (const m of members) if (m.loadSeq === null) this.sendLoad(m, seq);
  }

  private barrierExpired(): void {
    this.cancelBarrier = null;
    for (const m of [...this.members.values()]) if (m.phase === 'admitted') this.evict(m.volunteerId, 'missed the round barrier');
    this.tryBegin();
  }

  private begin(ring: Member[]): void {
    const now = this.deps.clock.now();
    const seq = this.job.seq + 1;
    const step = Math.max(...ring.map((m) => m.readyStep));
    const mode = this.starNext || this.ringFailures >= RING_FAILURES_BEFORE_STAR ? 'star' : 'ring';
    const joinersWaiting = [...this.members.values()].some((m) => m.phase === 'loading');
    const final = step >= targetStepsOf(this.job.spec) || this.finishing;
    const wantCheckpoint = joinersWaiting || final || seq % this.job.spec.checkpointEvery === 0;
    const members = ring.map((m) => m.volunteerId);
    const roundId = this.nextRoundId++;
    const deadline = now + this.deps.timing.roundTimeoutMs;
    this.round = {
      roundId, seq, mode, members, uploader: wantCheckpoint ? members[0] : null, startedAt: now, results: new Map(), failures: new Map(), starUpdates: new Map(), starSent: false,
      cancelDeadline: this.deps.clock.after(this.deps.timing.roundTimeoutMs, () => this.deadlinePassed(roundId)),
    };
    if (this.job.state === 'waiting') this.job = { ...this.job, state: 'running', updatedAt: now };
    for (const m of ring) m.status.state = 'syncing';
    this.saveRound(this.round, 'running', '');
    this.deps.toVolunteer(members, 'round:begin', { jobId: this.job.id, roundId, seq, members, mode, deadline, quorum: members.length, uploader: this.round.uploader });
    this.deps.count('rounds_begun', { mode });
  }

  private deadlinePassed(roundId: number): void {
    const r = this.round;
    if (!r || r.roundId !== roundId) return;
    const answered = (id: string) => r.failures.has(id) || (r.mode === 'star' && !r.starSent ? r.starUpdates.has(id) : r.results.has(id));
    const silent = r.members.filter((id) => !answered(id));
    if (r.mode === 'ring') this.ringFailures++;
    this.abortRound(`deadline passed; silent: ${silent.join(', ') || 'none'}`, silent);
    for (const id of silent) this.evict(id, `missed the deadline of round ${roundId}`);
    this.tryBegin();
  }

  private abortRound(reason: string, lost: string[]): void {
    const r = this.round;
    if (!r) return;
    r.cancelDeadline();
    this.round = null;
    this.saveRound(r, 'aborted', reason);
    this.deps.toVolunteer(r.members.filter((id) => !lost.includes(id)), 'round:abort', { jobId: this.job.id, roundId: r.roundId, reason, lost });
    this.deps.count('rounds_aborted');
    this.deps.log(`job ${this.job.id}: round ${r.roundId} (sync ${r.seq}) aborted: ${reason}`);
  }

  private sendStarResult(r: ActiveRound): void {
    const updates = [...r.starUpdates.values()];
    const { accepted, rejected } = rejectOutliers(updates);
    if (rejected) this.deps.count('updates_rejected', { reason: 'norm' });
    const result = aggregate(accepted, this.job.spec.aggregation, this.job.spec.trimFraction);
    r.starSent = true;
    const data = new Uint8Array(result.buffer);
    this.deps.toVolunteer(r.members, 'star:result', { jobId: this.job.id, roundId: r.roundId, data, contributors: accepted.length, rejected });
  }

  private commit(r: ActiveRound): void {
    r.cancelDeadline();
    this.round = null;
    const now = this.deps.clock.now();
    const results = [...r.results.values()];
    const checksums = new Set(results.map((x) => x.checksum));
    const step = Math.max(...results.map((x) => x.step));
    this.job = { ...this.job, seq: r.seq, step, updatedAt: now };
    this.ringFailures = 0;
    this.starNext = false;
    if (checksums.size > 1) {
      this.deps.count('checksum_mismatches');
      this.deps.log(`job ${this.job.id}: members disagree after sync ${r.seq}: ${[...checksums].join(', ')}`);
    }
    this.saveRound(r, 'committed', checksums.size === 1 ? results[0].checksum : `checksum mismatch: ${[...checksums].join(',')}`);
    this.persist(() => this.deps.store.updateJob(this.job));
    const losses = results.map((x) => x.metrics.loss).filter((x): x is number => x !== null);
    const point: MetricPoint = {
      seq: r.seq, step, time: now, loss: losses.length ? losses.reduce((a, b) => a + b, 0) / losses.length : null, accuracy: null,
      samplesPerSec: results.reduce((s, x) => s + (x.metrics.wallMs > 0 ? (x.metrics.samples * 1000) / x.metrics.wallMs : 0), 0),
      bytesSent: results.reduce((s, x) => s + x.metrics.bytesSent, 0), workers: r.members.length,
    };
    this.persist(() => this.deps.store.addMetric(this.job.id, point));
    for (const id of r.members) {
      const m = this.members.get(id);
      if (!m) continue;
      this.credit(m, now);
      Object.assign(m, { phase: 'admitted', lastRound: r.roundId, lastRoundMs: now - r.startedAt, workSince: now, workMs: 0 });
    }
    this.deps.toVolunteer(r.members, 'round:commit', { jobId: this.job.id, roundId: r.roundId, seq: r.seq, step });
    this.deps.count('rounds_committed', { mode: r.mode });
    this.deps.toDashboards(this.job.id, 'job:update', this.summary());
    this.deps.toDashboards(this.job.id, 'job:metrics', { jobId: this.job.id, points: [point] });
    this.changedWorkers();
    // Joiners told to load an older model now need this one.
    for (const m of this.members.values()) if (m.phase === 'loading' && m.loadSeq !== null && m.loadSeq < r.seq) m.loadSeq = null;
    if (r.uploader && this.members.has(r.uploader)) {
      const uploader = r.uploader;
      const timedOut = () => {
        this.evict(uploader, 'checkpoint upload timed out');
        this.tryBegin();
      };
      this.pendingUpload = { seq: r.seq, uploader, cancelTimer: this.deps.clock.after(this.deps.timing.loadTimeoutMs, timedOut) };
    } else if (step >= targetStepsOf(this.job.spec)) {
      this.stop(`reached ${step} steps`, 'done');
    } else {
      this.tryBegin();
    }
  }

  /** A checkpoint of `seq` is stored: joiners load it, and a finishing job ends. */
  private checkpointStored(info: CheckpointInfo): void {
    const seq = info.seq;
    if (!this.latestCheckpoint || seq >= this.latestCheckpoint.seq) this.latestCheckpoint = info;
    this.deps.toDashboards(this.job.id, 'job:update', this.summary());
    if (this.ended) return;
    if (seq === this.job.seq && (this.finishing || this.job.step >= targetStepsOf(this.job.spec))) {
      this.stop(this.finishing ? `reached target accuracy ${this.job.spec.targetAccuracy}` : `reached ${this.job.step} steps`, 'done');
      return;
    }
    if (seq === this.job.seq) for (const m of this.members.values()) if (m.phase === 'loading' && m.loadSeq === null) this.sendLoad(m, seq);
    this.tryBegin();
  }

  private dropPendingUpload(): void {
    this.pendingUpload?.cancelTimer();
    this.pendingUpload = null;
  }

  private sendLoad(m: Member, seq: number): void {
    m.loadSeq = seq;
    m.cancelLoadTimer?.();
    m.cancelLoadTimer = this.deps.clock.after(this.deps.timing.loadTimeoutMs, () => {
      this.evict(m.volunteerId, 'model load timed out');
      this.tryBegin();
    });
    const url = seq === 0 && this.latestCheckpoint === null ? null : this.deps.checkpointUrl(this.job.id, seq);
    this.deps.toVolunteer(m.volunteerId, 'model:load', { jobId: this.job.id, seq, step: this.job.step, url });
  }

  // ---------- credit ----------

  private joinedContributor(m: Member): void {
    const now = this.deps.clock.now();
    const known = this.contributors.get(m.identity);
    const c: ContributorRecord = {
      jobId: this.job.id, clientId: m.identity, samples: 0, syncs: 0, computeMs: 0, step: 0, bytesSent: 0, bytesReceived: 0, firstAt: now,
      ...known, volunteerId: m.volunteerId, adapter: describeAdapter(m), backend: m.capabilities.backend, lastAt: now, leftReason: null,
    };
    this.contributors.set(m.identity, c);
    if (m.displayName) this.names.set(m.identity, m.displayName);
    this.markContributor(m.identity);
  }

  private departedContributor(m: Member, reason: string): void {
    const c = this.contributors.get(m.identity);
    // Another tab of the same identity may still be in the job.
    if (!c || [...this.members.values()].some((x) => x.identity === m.identity)) return;
    Object.assign(c, { volunteerId: m.volunteerId, lastAt: this.deps.clock.now(), leftReason: reason });
    this.markContributor(m.identity);
  }

  /**
   * A committed sync counted from what the server itself saw: one sync, the job's H local steps of
   * its batch size, and the time from being handed work to reporting ready. Nothing the member claims.
   */
  private credit(m: Member, now: number): void {
    const c = this.contributors.get(m.identity);
    if (!c) return;
    c.syncs += 1;
    c.samples += this.job.spec.H * this.job.spec.hyperparameters.batchSize;
    c.computeMs += m.workMs;
    c.lastAt = now;
    this.markContributor(m.identity);
  }

  private markContributor(identity: string): void {
    this.dirtyContributors.add(identity);
    this.cancelContributorsFlush ??= this.deps.clock.after(CONTRIBUTORS_FLUSH_MS, () => this.flushContributors());
  }

  private flushContributors(): void {
    this.cancelContributorsFlush?.();
    this.cancelContributorsFlush = null;
    if (this.dirtyContributors.size === 0) return;
    const records = [...this.dirtyContributors].map((id) => ({ ...this.contributors.get(id)! }));
    this.dirtyContributors.clear();
    this.persist(() => this.deps.store.saveContributors(records));
  }

  // ---------- helpers ----------

  private fits(v: VolunteerInfo): boolean {
    return v.capabilities.limits.maxStorageBufferBindingSize >= PRESET_FLAT_LENGTHS[this.job.spec.preset] * 4;
  }

  private saveRound(r: ActiveRound, outcome: RoundRecord['outcome'], detail: string): void {
    const record: RoundRecord = {
      jobId: this.job.id, roundId: r.roundId, seq: r.seq, mode: r.mode, members: r.members, outcome, startedAt: r.startedAt,
      endedAt: outcome === 'running' ? null : this.deps.clock.now(), detail,
    };
    this.persist(() => this.deps.store.saveRound(record));
  }

  private persist(write: () => Promise<void> | void): void {
    this.persistQueue = this.persistQueue.then(write).catch((e) => this.deps.log(`job ${this.job.id}: store write failed: ${(e as Error).stack ?? e}`));
  }

  private changedWorkers(): void {
    if (this.workerTableTimer || !this.deps.watched(this.job.id)) return;
    this.workerTableTimer = this.deps.clock.after(WORKER_TABLE_INTERVAL_MS, () => {
      this.workerTableTimer = null;
      this.deps.toDashboards(this.job.id, 'job:workers', { jobId: this.job.id, workers: this.workers() });
    });
  }
}

/** The members a member may signal: its left and right neighbours in the ring. */
export function ringNeighbours(ring: readonly string[], id: string): string[] {
  const i = ring.indexOf(id);
  if (i < 0 || ring.length < 2) return [];
  return [...new Set([ring[(i + ring.length - 1) % ring.length], ring[(i + 1) % ring.length]])];
}

function describeAdapter(m: Member): string {
  const a = m.capabilities.adapter;
  const name = [a.vendor, a.architecture, a.device || a.description].filter(Boolean).join(' ');
  return `${name || 'unknown adapter'}${m.capabilities.backend === 'cpu' ? ' (CPU fallback)' : ''}`;
}
