// The round clock of one job. Members go loading → admitted (holding the global model of the last
// committed sync and training locally) → ready (at the barrier for the next sync). When every admitted
// member is ready the coordinator begins a round (ring order, deadline, quorum); members report their
// result without applying it, and the round commits when all have reported. A member lost mid-round
// aborts the round and it is re-formed at once with the survivors, who still hold their local progress.
// All state changes are synchronous; persistence is queued behind them in order.
//
// No single member is believed: steps are the server's own count, accuracy is combined from several
// evaluators (evaluations.ts), a checkpoint is stored only when it is the job's model with the
// checksum the evaluators agreed on, a joiner's loaded model is checked against it, and deadlines
// follow the members' pace (pace.ts). A member removed for a fault is kept out for a while, longer
// each time (penalties.ts).
import {
  flatLengthOf,
  ProtocolError,
  targetStepsOf,
  aggregateWith,
  cappedWeights,
  cutSteps,
  pacedStepCeiling,
  PROBE_ROUND_ID,
  screenContributions,
  verifyCheckpoint,
  type Assignment,
  type CheckpointInfo,
  type JobSummary,
  type MetricPoint,
  type RoundBegin,
  type VolunteerEventName,
  type VolunteerEventParsed,
  type WorkerRow,
} from '@tabfleet/protocol';
import { createHash, randomInt } from 'node:crypto';
import { contributorName, departedRow } from '../credit';
import type { JobRecord, RoundRecord } from '../store/store';
import { ContributorLedger, describeAdapter } from './contributors';
import { reportFits } from './group-check';
import { GroupRoundChecks } from './group-round';
import { GroupedSync } from './grouped-sync';
import type { ActiveRound } from './round';
import { decodeUpdate } from './star-update';
import { combineEvaluations, majorityChecksum, type EvaluationReport } from './evaluations';
import { Pace } from './pace';
import { JoinProbes } from './join-probes';
import { PeerDistances } from './peer-distances';
import { AutoSync, FIRST_WORK_MS, isPaced, measuredPace, nominalSteps, roundBudgetMs, samplesPerStep, snappedBudgetMs, stepsFor, SyncTimeModel, unmeasuredSteps, unmeasuredWork } from './pacing';
import { Penalties, type FaultKind } from './penalties';
import { Replication } from './replication';
import { Reputations } from './reputation';
import { hasStanding, networkOf, networkWouldDominate, seatsFrom } from './standing';
import type { CoordinatorDeps, VolunteerInfo } from './types';

type Phase = 'loading' | 'admitted' | 'ready';
/** A fault of timing (missed a deadline) or of what it sent (a wrong checkpoint, digest or evaluation). */
type Fault = Exclude<FaultKind, 'departure'>;

interface Member extends VolunteerInfo {
  shard: number;
  phase: Phase;
  /** The sync whose model it was told to load (null: waiting for a checkpoint to exist). */
  loadSeq: number | null;
  loadSince: number;
  cancelLoadTimer: (() => void) | null;
  status: { state: string; hidden: boolean; step: number; samplesPerSec: number; bytesSent: number; bytesReceived: number };
  lastRound: number | null;
  lastRoundMs: number | null;
  /** Whom its work is credited to: its client id, or its volunteer id when it sent none. */
  identity: string;
  /** The network it connects from (its address, or prefix where the server tells networks apart: standing.ts). */
  network: string;
  /** When it was last handed work (admitted, or a sync committed), and how long it took to be ready. */
  workSince: number;
  workMs: number;
  /** The time budget its current work was handed (0: none), so its lateness is counted past it. */
  workBudgetMs: number;
  /** Not ready when the others were: rounds go on without it (since when), until it reports ready. */
  leftOutSince: number | null;
  /** A sync committed without it: its local work is for an older model, and it reloads when it reports. */
  stale: boolean;
  /** Sits out the next sync (an accusation nobody could settle), then reloads the job's model. */
  sitsOut: boolean;
  /** Measured time per local step (pacing.ts), the steps it was given for its current work, its share of the last sync's samples. */
  msPerStep: number | null;
  steps: number;
  share: number | null;
}

/** A checkpoint for the just-committed sync that the uploader still owes, or that waits to be verified. */
interface PendingUpload {
  seq: number;
  uploader: string;
  since: number;
  /** Arrived and is the job's model; stored once it matches the evaluators' agreed checksum. */
  received: { data: Uint8Array; checksum: string } | null;
  cancelTimer: () => void;
}

/** A sync's model being evaluated by several members. */
interface OpenEvaluation {
  seq: number;
  step: number;
  /** How many were asked (the majority is of this number, so silence cannot shrink it). */
  asked: number;
  since: number;
  evaluators: Set<string>;
  reports: Map<string, EvaluationReport>;
  cancelTimer: () => void;
}

/** Ring failures within one sync before that sync falls back to the star (server) path. */
const RING_FAILURES_BEFORE_STAR = 2;
/** Dashboards get the worker table at most this often. */
const WORKER_TABLE_INTERVAL_MS = 500;
/** Members that evaluate an evaluated or checkpointed sync (fewer when the round has fewer). */
const EVALUATORS = 3;
/** A member whose pace is unknown may take this long for one step (4 first boxes; see runningBudgets). */
const UNMEASURED_STEP_MS = 4 * FIRST_WORK_MS;
/** Moshpit jobs: a joiner admitted this long after the first member, once the first sync's barrier counts down, takes sync 2. */
const JOIN_GRACE_MS = 5_000;
/** Before any joiner was timed, the round waits this long for loading joiners once the others are ready. */
const FIRST_LOAD_GUESS_MS = 30_000;
/** Attempts at writing a verified checkpoint to the store before the sync's checkpoint is re-asked. */
const STORE_ATTEMPTS = 3;

export class JobCoordinator {
  private readonly members = new Map<string, Member>();
  /**
   * Members by phase, and those left out of the coming sync (all admitted): kept beside the map so
   * the barrier is counted, not scanned, on every event (a Moshpit job has up to 10,000 members).
   * Phases and left-outs change only through setPhase and setLeftOut.
   */
  private readonly inPhase: Record<Phase, Set<Member>> = { loading: new Set(), admitted: new Set(), ready: new Set() };
  private readonly leftOut = new Set<Member>();
  /** Loading members not sent a model yet (loadSeq null): the rest of `inPhase.loading` have a load out. */
  private readonly unsentLoads = new Set<Member>();
  /** Data shards of the members: a joiner takes the lowest free one. */
  private readonly shardsHeld = new Set<number>();
  private round: ActiveRound | null = null;
  private pendingUpload: PendingUpload | null = null;
  private nextRoundId: number;
  private latestCheckpoint: CheckpointInfo | null;
  private ringFailures = 0;
  private starNext = false;
  /** Stop after the next committed sync that leaves a checkpoint (target accuracy reached). */
  private finishing = false;
  private cancelBarrier: (() => void) | null = null;
  /** When the first member was admitted (to this coordinator): Moshpit joiners much later take sync 2. */
  private firstAdmittedAt: number | null = null;
  /** Loading joiners are waited for until this fires; then the round goes on without them. */
  private cancelJoinerHold: (() => void) | null = null;
  private joinerHoldExpired = false;
  /** The last checkpoint was lost (upload stalled, refused or not stored): the next sync is checkpointed. */
  private checkpointOwed = false;
  private readonly pace = new Pace();
  /** Round trips members measured to each other (regional Moshpit jobs lay their groups out by them). */
  private readonly distances = new PeerDistances();
  private readonly probes: JoinProbes;
  private readonly syncTime = new SyncTimeModel();
  private syncTimeMembers = '';
  /** `auto` LocalSGD and DiLoCo jobs: the next sync's H and payload precision (paced ddp has no H to choose). */
  private readonly autoSync: AutoSync | null;
  private readonly penalties = new Penalties((records) => this.persist(() => this.deps.store.savePenalties(this.job.id, records)));
  private readonly groupChecks: GroupRoundChecks;
  private readonly replication: Replication;
  private readonly reputations = new Reputations((clientId, change) => this.persist(() => this.deps.store.addReputation(clientId, change)));
  private readonly evaluations = new Map<number, OpenEvaluation>();
  /** Checksum of the parameters in each stored checkpoint (what a joiner that loads it must report). */
  private readonly checkpointChecksums = new Map<number, string>();
  /** Closed evaluations of recent syncs: the agreed checksum, or null when the evaluators disagreed. */
  private readonly settledChecksums = new Map<number, string | null>();
  private workerTableTimer: (() => void) | null = null;
  private persistQueue: Promise<void> = Promise.resolve();
  private latestAccuracy: number | null = null;
  /** What the job holds back on and why (an unvouched target accuracy), shown on the dashboard. */
  private notice: string | null = null;
  /** Everyone who has been in the job, by identity (loaded from the store, kept in step with it). */
  private readonly contributors: ContributorLedger;

  private constructor(
    private job: JobRecord,
    private readonly deps: CoordinatorDeps,
    lastRoundId: number,
    latestCheckpoint: CheckpointInfo | null,
  ) {
    this.nextRoundId = lastRoundId + 1;
    this.latestCheckpoint = latestCheckpoint;
    this.probes = new JoinProbes(() => deps.clock.now());
    const spec = job.spec;
    // fp16 only where the ring moves the dense payload as sent: trusted jobs without compression.
    this.autoSync = spec.pacing === 'auto' && spec.strategy !== 'ddp' ? new AutoSync(spec, spec.trust === 'trusted' && spec.compression === 'none' ? ['f32', 'f16'] : ['f32']) : null;
    this.contributors = new ContributorLedger(job.id, deps.clock, (records) => this.persist(() => deps.store.saveContributors(records)));
    // The helpers' hosts read the job as it is when they call (it is replaced on every change).
    const current = () => this.job;
    const identity = (volunteerId: string) => this.members.get(volunteerId)?.identity ?? volunteerId;
    this.groupChecks = new GroupRoundChecks({
      get jobId() {
        return current().id;
      },
      get spec() {
        return current().spec;
      },
      deps,
      commit: (r) => this.commit(r),
      reject: (r, liars, why, fault) => this.rejectRound(r, liars, why, fault),
      onProbation: (volunteerId) => this.reputations.onProbation(identity(volunteerId)),
      verified: (volunteerId) => this.reputations.verified(identity(volunteerId)),
      hasStanding: (volunteerId) => this.hasStanding(identity(volunteerId)),
      sameNetwork: (a, b) => this.networkRulesApply && this.members.get(a)?.network === this.members.get(b)?.network,
      voiceOf: (volunteerId) => (this.networkRulesApply ? this.members.get(volunteerId)?.network ?? volunteerId : volunteerId),
      sitOut: (ids, why) => this.sitOut(ids, why),
    });
    this.replication = new Replication({
      get jobId() {
        return current().id;
      },
      get spec() {
        return current().spec;
      },
      deps,
      members: () => [...this.members.values()].filter((m) => m.phase !== 'loading').map((m) => ({ volunteerId: m.volunteerId, identity: m.identity, shard: m.shard })),
      onProbation: (id) => this.reputations.onProbation(id),
      verified: (id) => this.reputations.verified(id),
      fault: (id, reason) => this.reputations.fault(id, reason, deps.clock.now()),
      networkOf: (volunteerId) => (this.networkRulesApply ? this.members.get(volunteerId)?.network ?? null : null),
      hasStanding: (id) => this.hasStanding(id),
      shardUrl: (index) => deps.shardUrl?.(current().id, current().spec, index, current().spec.maxWorkers) ?? null,
    });
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
    c.penalties.restore(await deps.store.penalties(job.id));
    if (checkpoint) {
      const bytes = await deps.store.readCheckpoint(job.id, checkpoint.seq);
      if (bytes) c.checkpointChecksums.set(checkpoint.seq, verifyCheckpoint(job.spec, bytes).digest);
    }
    const contributors = await deps.store.contributors(job.id);
    // Members when the server stopped are not members now; they rejoin under the same identity.
    c.contributors.restore(contributors, await deps.store.displayNames(contributors.map((x) => x.clientId)));
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
    return !this.ended && this.members.size < this.job.spec.maxWorkers && this.fits(v) && this.refusal(v) === null;
  }

  /** Why this volunteer may not join now: kept out after a fault, or its address holds its share of slots. */
  private refusal(v: VolunteerInfo): string | null {
    const identity = v.clientId ?? v.volunteerId;
    const network = this.networkOf(v.address);
    const newcomer = !hasStanding(v.reputation) && !this.hasStanding(identity);
    const kept = this.penalties.keptOut(identity, network, this.deps.clock.now(), newcomer);
    if (kept) return kept;
    const share = this.deps.addressJobShare ?? 1;
    if (v.address && share < 1) {
      const cap = Math.max(1, Math.floor(this.job.spec.maxWorkers * share));
      const fromAddress = [...this.members.values()].filter((m) => m.address === v.address).length;
      if (fromAddress >= cap) return `${fromAddress} of this job's slots are taken from your address (at most ${cap})`;
    }
    if (this.networkRulesApply) {
      const fromNetwork = [...this.members.values()].filter((m) => m.network === network).length;
      if (networkWouldDominate(fromNetwork, this.members.size)) {
        return `${fromNetwork} of this job's ${this.members.size} members are from your network (${network}); one network is never a majority of an untrusted job`;
      }
    }
    return null;
  }

  /** Untrusted jobs on a server that tells networks apart: quorums count networks and need standing (standing.ts). */
  private get networkRulesApply(): boolean {
    return !!this.deps.networkRules && this.job.spec.trust === 'untrusted';
  }

  private networkOf(address: string | undefined): string {
    return networkOf(address, this.deps.networkRules ?? false);
  }

  /** Checks confirmed enough of this identity's work since its last fault (it may evaluate, upload, break ties). */
  private hasStanding(identity: string): boolean {
    return !this.reputations.onProbation(identity);
  }

  summary(): JobSummary {
    return {
      id: this.job.id, name: this.job.name, spec: this.job.spec, state: this.job.state, createdAt: this.job.createdAt,
      updatedAt: this.job.updatedAt, seq: this.job.seq, step: this.job.step, workers: this.members.size,
      latestCheckpoint: this.latestCheckpoint, latestAccuracy: this.latestAccuracy, ...(this.job.endReason ? { endReason: this.job.endReason } : {}),
      ...(this.notice ? { notice: this.notice } : {}),
      syncTime: {
        nextPredictedMs: this.syncTime.next, last: this.syncTime.last, medianError: this.syncTime.medianError,
        ...(this.autoSync ? { auto: this.autoSync.choice && { ...this.autoSync.choice, exchangeMs: { ...this.autoSync.exchangeMs } } } : {}),
      },
    };
  }

  /** The members, then everyone who contributed and is no longer in the job (state `left`). */
  workers(): WorkerRow[] {
    const live = [...this.members.values()].map((m) => ({
      volunteerId: m.volunteerId, jobId: this.job.id, state: m.status.state, hidden: m.status.hidden, contributor: contributorName(m.identity, this.contributors.name(m.identity)),
      syncs: this.contributors.syncs(m.identity), adapter: describeAdapter(m), backend: m.capabilities.backend,
      step: m.status.step, samplesPerSec: m.status.samplesPerSec, bytesSent: m.status.bytesSent, bytesReceived: m.status.bytesReceived,
      lastRound: m.lastRound, lastRoundMs: m.lastRoundMs, admitted: m.phase !== 'loading', faults: this.penalties.offences(m.identity),
      reputation: this.reputations.row(m.identity),
      pace: isPaced(this.job.spec) ? { msPerStep: m.msPerStep === null ? null : Math.round(m.msPerStep * 10) / 10, steps: m.steps, share: m.share } : null,
    }));
    const present = new Set([...this.members.values()].map((m) => m.identity));
    const departed = this.contributors.absent(present).map((c) => departedRow(c, this.contributors.name(c.clientId), this.penalties.offences(c.clientId), this.reputations.row(c.clientId)));
    return [...live, ...departed];
  }

  /** Waits until everything queued so far (contributor totals included) is in the store. */
  flushed(): Promise<void> {
    this.contributors.flush();
    return this.persistQueue;
  }

  // ---------- membership ----------

  join(v: VolunteerInfo): Assignment {
    if (this.ended) throw new ProtocolError('conflict', `job ${this.job.id} has ended (${this.job.state})`);
    if (this.members.has(v.volunteerId)) throw new ProtocolError('conflict', `already a member of job ${this.job.id}`);
    if (this.members.size >= this.job.spec.maxWorkers) throw new ProtocolError('capacity', `job ${this.job.id} has its ${this.job.spec.maxWorkers} workers`);
    if (!this.fits(v)) throw new ProtocolError('capacity', `this adapter cannot hold the ${this.job.spec.preset} model`);
    const refusal = this.refusal(v);
    if (refusal) throw new ProtocolError('rate_limited', `job ${this.job.id}: ${refusal}`);
    let shard = 0;
    while (this.shardsHeld.has(shard)) shard++;
    this.shardsHeld.add(shard);
    const identity = v.clientId ?? v.volunteerId;
    const member: Member = {
      ...v, network: this.networkOf(v.address), shard, phase: 'loading', loadSeq: null, loadSince: this.deps.clock.now(), cancelLoadTimer: null, lastRound: null, lastRoundMs: null,
      status: { state: 'loading', hidden: false, step: 0, samplesPerSec: 0, bytesSent: 0, bytesReceived: 0 }, identity, workSince: this.deps.clock.now(), workMs: 0, workBudgetMs: 0,
      leftOutSince: null, stale: false, sitsOut: false, msPerStep: null, steps: unmeasuredSteps(this.job.spec), share: null,
    };
    this.members.set(v.volunteerId, member);
    this.inPhase.loading.add(member);
    this.unsentLoads.add(member);
    this.reputations.know(identity, v.reputation);
    this.contributors.joined(member);
    const assignment: Assignment = { job: { id: this.job.id, spec: this.job.spec }, shard: { index: shard, count: this.job.spec.maxWorkers } };
    const dataUrl = this.deps.shardUrl?.(this.job.id, this.job.spec, shard, this.job.spec.maxWorkers);
    if (dataUrl) assignment.dataUrl = dataUrl;
    if (this.job.spec.regionalGroups) {
      const probePeers = this.probes.assign(v.volunteerId, [...this.members.keys()], shuffled);
      if (probePeers.length) assignment.probePeers = probePeers;
      for (const peer of probePeers) this.deps.toVolunteer(peer, 'peers:probe', { jobId: this.job.id, peer: v.volunteerId });
    }
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
    const m = this.members.get(volunteerId);
    // Leaving mid-round aborts it (or its group): a light fault, so leaving and asking again is not free.
    if (m && this.inRunningRound(volunteerId)) {
      this.penalties.punish(m.identity, m.network, `left during a round (${reason})`, this.deps.clock.now(), 'departure', !!this.deps.networkRules);
    }
    this.removeMember(volunteerId, reason);
    this.tryBegin();
  }

  private inRunningRound(volunteerId: string): boolean {
    const r = this.round;
    if (!r) return false;
    if (!r.groups) return r.members.includes(volunteerId);
    const g = r.groups.groupOf(volunteerId);
    return g !== undefined && r.groups.state[g] === 'running';
  }

  private removeMember(volunteerId: string, reason: string): void {
    const m = this.members.get(volunteerId);
    if (!m) return;
    m.cancelLoadTimer?.();
    this.members.delete(volunteerId);
    this.distances.forget(volunteerId);
    this.probes.forget(volunteerId);
    this.inPhase[m.phase].delete(m);
    this.leftOut.delete(m);
    this.unsentLoads.delete(m);
    this.shardsHeld.delete(m.shard);
    this.replication.left(volunteerId);
    this.contributors.departed(m, reason, [...this.members.values()].some((x) => x.identity === m.identity));
    this.deps.log(`job ${this.job.id}: ${volunteerId} left (${reason})`);
    if (this.pendingUpload?.uploader === volunteerId && !this.pendingUpload.received) this.loseCheckpoint(`its uploader ${volunteerId} left`);
    const r = this.round;
    if (r?.groups) {
      // Only its group's ring needs it; the other groups go on.
      const g = r.groups.groupOf(volunteerId);
      if (g !== undefined && r.groups.state[g] === 'running') this.failGroup(r, g, `member ${volunteerId} lost: ${reason}`, [volunteerId]);
    } else if (r?.members.includes(volunteerId)) this.abortRound(`member ${volunteerId} lost: ${reason}`, [volunteerId]);
    for (const ev of [...this.evaluations.values()]) {
      if (ev.evaluators.delete(volunteerId)) this.evaluationProgress(ev);
    }
    this.changedWorkers();
  }

  /**
   * Removes a member that is still connected but failed the job (its timing, or a check of what it
   * sent); the caller re-forms. It is kept out for a while, longer for each repeat. Only integrity
   * faults count against its address too: an honest but slow tab behind a shared address (a campus
   * NAT, a test machine) must not shut out its neighbours.
   */
  private evict(volunteerId: string, reason: string, fault: Fault = 'liveness'): void {
    const m = this.members.get(volunteerId);
    if (!m) return;
    const keptOutMs = this.penalties.punish(m.identity, m.network, reason, this.deps.clock.now(), fault, !!this.deps.networkRules);
    if (fault === 'integrity') this.reputations.fault(m.identity, reason, this.deps.clock.now());
    this.deps.count('members_evicted');
    this.deps.log(`job ${this.job.id}: evicting ${volunteerId} (${m.identity}${m.address ? ` at ${m.address}` : ''}), kept out ${Math.round(keptOutMs / 1000)} s: ${reason}`);
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
    this.cancelJoinerHold?.();
    this.cancelJoinerHold = null;
    for (const ev of this.evaluations.values()) ev.cancelTimer();
    this.pendingUpload?.cancelTimer();
    this.workerTableTimer?.();
    this.workerTableTimer = null;
    for (const m of this.members.values()) m.cancelLoadTimer?.();
  }

  stop(reason: string, state: 'stopped' | 'done' | 'failed' = 'stopped'): void {
    if (this.ended) throw new ProtocolError('conflict', `job ${this.job.id} has already ended (${this.job.state})`);
    if (this.round) this.abortRound(reason, []);
    this.cancelBarrier?.();
    this.cancelJoinerHold?.();
    this.dropPendingUpload();
    this.job = { ...this.job, state, endReason: reason, updatedAt: this.deps.clock.now() };
    this.persist(() => this.deps.store.updateJob(this.job));
    // Evaluations still open are recorded with the reports in (the final sync's accuracy among them).
    for (const ev of [...this.evaluations.values()]) this.finishEvaluation(ev);
    const leaving = [...this.members.values()];
    this.members.clear();
    for (const set of Object.values(this.inPhase)) set.clear();
    this.leftOut.clear();
    this.unsentLoads.clear();
    this.shardsHeld.clear();
    for (const m of leaving) {
      m.cancelLoadTimer?.();
      this.contributors.departed(m, `job ${state}`, false);
      this.deps.toVolunteer(m.volunteerId, 'job:end', { jobId: this.job.id, reason });
    }
    this.contributors.flush();
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
      case 'round:validation': return this.groupChecks.onValidation(m, this.currentRound(m, (payload as { roundId: number }).roundId), payload as VolunteerEventParsed<'round:validation'>);
      case 'replica:upload': return this.replication.onUpload(m.volunteerId, payload as VolunteerEventParsed<'replica:upload'>, flatLengthOf(this.job.spec));
      case 'evidence:upload': return this.groupChecks.onEvidence(m, this.currentRound(m, (payload as { roundId: number }).roundId), payload as VolunteerEventParsed<'evidence:upload'>);
      case 'signal': return this.onSignal(m, payload as VolunteerEventParsed<'signal'>);
      case 'peers:rtt': return this.onProbeReport(m, payload as VolunteerEventParsed<'peers:rtt'>);
      case 'star:update': return this.onStarUpdate(m, payload as VolunteerEventParsed<'star:update'>);
      case 'checkpoint:upload': return this.onUpload(m, payload as VolunteerEventParsed<'checkpoint:upload'>);
      case 'metrics': return this.onMetrics(m, payload as VolunteerEventParsed<'metrics'>);
      default: throw new ProtocolError('unknown_event', `${event} is not a job event`);
    }
  }

  /** Heartbeat status; no job state changes. */
  status(volunteerId: string, status: Member['status']): void {
    const m = this.members.get(volunteerId);
    if (!m) return;
    m.status = status;
    this.contributors.reported(m.identity, volunteerId, status);
    this.changedWorkers();
  }

  private onModelLoaded(m: Member, e: VolunteerEventParsed<'model:loaded'>): object {
    if (m.phase !== 'loading' || m.loadSeq !== e.seq) throw new ProtocolError('stale_round', `was not asked to load the model of sync ${e.seq}`);
    const expected = this.checkpointChecksums.get(e.seq);
    if (expected && e.checksum !== expected) {
      const why = `loaded a model with checksum ${e.checksum}; the checkpoint of sync ${e.seq} holds ${expected}`;
      this.evict(m.volunteerId, why, 'integrity');
      this.tryBegin();
      throw new ProtocolError('bad_tensor', why);
    }
    m.cancelLoadTimer?.();
    m.cancelLoadTimer = null;
    this.pace.record('load', this.deps.clock.now() - m.loadSince);
    // A Moshpit member's model may be a sync old: the groups average it in like any other.
    const grouped = this.job.spec.groupSize !== undefined;
    if (e.seq !== this.job.seq && !grouped) {
      // A sync committed while it loaded; it needs the newer model.
      this.setLoadSeq(m, null);
      if (this.latestCheckpoint?.seq === this.job.seq && !this.round) this.sendLoad(m, this.job.seq);
      return { admitted: false };
    }
    this.setPhase(m, 'admitted');
    m.workSince = this.deps.clock.now();
    m.workBudgetMs = 0;
    this.firstAdmittedAt ??= m.workSince;
    m.status.state = 'training';
    // A member whose pace is not measured yet (the first sync, a joiner) does its first work
    // time-boxed (pacing unmeasuredWork): a joiner until shortly before the others' budgets end.
    const budgetsEnd = m.msPerStep === null && this.job.seq > 0 ? this.runningBudgets().endsAt : null;
    const first = m.msPerStep === null ? unmeasuredWork(this.job.spec, this.stepsLeft(), budgetsEnd === null ? null : budgetsEnd - m.workSince) : null;
    const budget = first ? first.budgetMs ?? null : this.stepBudget();
    m.steps = first ? first.steps : this.plannedSteps(m, budget);
    const cut = this.cutToTarget({ [m.volunteerId]: m.steps });
    this.handBudgets([m.volunteerId], cut ? null : budget);
    // A Moshpit joiner mid-job starts its work after the others started theirs: the coming sync does
    // not wait for it (it joins the one after, work kept), so joiners never stall a sync of thousands.
    if (grouped && this.joinersJoinLater()) this.setLeftOut(m, m.workSince);
    this.changedWorkers();
    this.tryBegin();
    // Steps only in a paced job: otherwise every member does the job's H (ddp: one gradient on its batch).
    return { admitted: true, ...(isPaced(this.job.spec) ? { steps: m.steps, ...(cut ? {} : this.localBudget(budget)) } : {}) };
  }

  private onReady(m: Member, e: VolunteerEventParsed<'round:ready'>): object {
    if (m.phase === 'loading') throw new ProtocolError('conflict', 'not admitted yet: load the global model first');
    if (m.stale) {
      // Syncs went on without it: its work is dropped, and it loads the job's model as a joiner would.
      this.deps.log(`job ${this.job.id}: ${m.volunteerId} is ready with work for sync ${e.seq}, but the job is at sync ${this.job.seq}: it reloads`);
      this.reload(m);
      this.tryBegin();
      return { waiting: false, reload: true };
    }
    // Moshpit members left out of syncs keep their work (their own model goes into a later group's average).
    const grouped = this.job.spec.groupSize !== undefined;
    if (grouped ? e.seq > this.job.seq + 1 : e.seq !== this.job.seq + 1) throw new ProtocolError('stale_round', `the next sync is ${this.job.seq + 1}, not ${e.seq}`);
    if (m.phase === 'ready') return { waiting: true };
    // The original of a replicated unit trained the unit (its H steps) as this sync's work, whatever it was given.
    const unitSteps = this.replication.unitWorkOf(m.volunteerId, e.seq);
    if (unitSteps !== null) m.steps = unitSteps;
    else if (e.steps !== undefined) m.steps = this.reportedSteps(m, e.steps);
    this.setPhase(m, 'ready');
    // Time on the job's work as the server sees it; a member slower than the barrier is evicted anyway.
    m.workMs = Math.min(this.deps.clock.now() - m.workSince, this.deps.timing.barrierTimeoutMs);
    // The barrier's pace is how far members run past their budgets (all their work when they have
    // none): a paced job's budgets change from sync to sync, their overruns much less.
    this.pace.record('overrun', Math.max(0, m.workMs - m.workBudgetMs));
    this.tryBegin();
    return { waiting: this.round === null };
  }

  private currentRound(m: Member, roundId: number): ActiveRound {
    const r = this.round;
    if (r?.groups) {
      const g = r.groups.groupIn(m.volunteerId, roundId);
      if (g === undefined) throw new ProtocolError(r.members.includes(m.volunteerId) ? 'stale_round' : 'not_member', `round ${roundId} is not ${m.volunteerId}'s group round`);
      if (r.groups.state[g] !== 'running') throw new ProtocolError('stale_round', `group round ${roundId} has ${r.groups.state[g]}`);
      return r;
    }
    if (!r || r.roundId !== roundId) throw new ProtocolError('stale_round', `round ${roundId} is not the current round`);
    if (!r.members.includes(m.volunteerId)) throw new ProtocolError('not_member', `not a member of round ${roundId}`);
    return r;
  }

  private onResult(m: Member, e: VolunteerEventParsed<'round:result'>): object {
    const r = this.currentRound(m, e.roundId);
    if (r.mode === 'star' && !r.starSent) throw new ProtocolError('conflict', 'the star result has not been sent yet');
    if (r.results.has(m.volunteerId)) return { duplicate: true };
    if (r.mode === 'group') {
      const misfit = e.group ? reportFits(r.members, e.group) : 'a group round\'s result carries its group report';
      if (misfit) throw new ProtocolError('bad_request', misfit);
    }
    // Round trips only to the peers it was linked to in this round: its ring neighbours.
    if (e.rttMs && this.job.spec.regionalGroups) this.distances.record(m.volunteerId, linkedPeersOnly(r, m.volunteerId, e.rttMs));
    // `e.step` is the member's own count: the job's step is the server's (r.step), whatever it says.
    // Paced: untrusted, from the server's time for the steps it counted (pacing measuredPace), not the member's computeMs.
    m.msPerStep = measuredPace(this.job.spec, m.msPerStep, { steps: r.steps?.[m.volunteerId] ?? nominalSteps(this.job.spec), workMs: m.workMs, computeMs: e.metrics.computeMs ?? e.metrics.wallMs });
    r.results.set(m.volunteerId, { checksum: e.checksum, metrics: e.metrics, group: r.mode === 'group' ? e.group : undefined });
    if (r.groups) {
      const g = r.groups.groupOf(m.volunteerId)!;
      if (r.groups.groups[g].every((id) => r.results.has(id))) this.commitGroup(r, g);
      else this.settleIfAnswered(r, m.volunteerId);
    } else if (r.results.size === r.members.length) {
      if (r.mode === 'group') this.groupChecks.resultsIn(r);
      else this.commit(r);
    } else this.settleIfAnswered(r, m.volunteerId);
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
    if (e.code === 'device_lost' || r.mode === 'star') {
      // A star round needs nothing but this member and the server: failing it is the member's own fault.
      this.evict(m.volunteerId, e.code === 'device_lost' ? 'GPU device lost' : `failed a star round (${e.code})`);
      this.tryBegin();
      return {};
    }
    this.settleIfAnswered(r, m.volunteerId);
    return {};
  }

  /**
   * Once every member of the round (a Moshpit sync: of `member`'s group) has answered with a result or
   * a failure, and some failed, it is re-formed at once rather than at the deadline. (It ran only on
   * failures before: a failure that arrived before the others' results left the round to its deadline.)
   */
  private settleIfAnswered(r: ActiveRound, member: string): void {
    const group = r.groups ? r.groups.groups[r.groups.groupOf(member)!] : r.members;
    if (!group.every((id) => r.failures.has(id) || r.results.has(id)) || !group.some((id) => r.failures.has(id))) return;
    const failed = group.filter((id) => r.failures.has(id));
    const why = `failed: ${failed.map((id) => `${id} ${r.failures.get(id)}`).join('; ')}`;
    if (r.groups) return this.failGroup(r, r.groups.groupOf(member)!, why, []);
    const unreachable = this.checkUnreachableClaims(r, failed);
    this.ringFailures++;
    this.abortRound(why, unreachable.refuted);
    for (const id of unreachable.refuted) this.evict(id, `round ${r.roundId}: claimed it could not reach its peers, but every other member finished the exchange with it`);
    if (unreachable.corroborated) this.starNext = true;
    this.tryBegin();
  }

  /**
   * A member's `unreachable` is checked against what the others saw before the next sync goes through
   * the server: a link has two ends, so when the claimant could not reach its peers they could not
   * finish either. A claim while every other member finished the exchange is refuted (it forced every
   * sync into a star round, 17 of 17, by claiming after taking part); one some other member's failure
   * bears out moves the next sync to the star path as before.
   */
  private checkUnreachableClaims(r: ActiveRound, failed: string[]): { corroborated: boolean; refuted: string[] } {
    const claims = failed.filter((id) => r.failures.get(id)!.startsWith('unreachable'));
    if (claims.length === 0) return { corroborated: false, refuted: [] };
    const othersFinished = (id: string) => r.members.every((x) => x === id || r.results.has(x));
    const refuted = claims.filter(othersFinished);
    if (refuted.length) this.deps.count('unreachable_claims_refuted');
    return { corroborated: refuted.length < claims.length, refuted };
  }

  private onSignal(m: Member, e: VolunteerEventParsed<'signal'>): object {
    if (e.roundId === PROBE_ROUND_ID) {
      if (!this.probes.linked(m.volunteerId, e.to)) throw new ProtocolError('not_neighbour', `${e.to} and ${m.volunteerId} are not a joiner and the member it was told to measure`);
      this.deps.toVolunteer(e.to, 'signal', { jobId: this.job.id, roundId: PROBE_ROUND_ID, from: m.volunteerId, data: e.data });
      return {};
    }
    const r = this.currentRound(m, e.roundId);
    // A ring member talks to its two neighbours; a group member to every other member.
    const ring = r.groups ? r.groups.groups[r.groups.groupOf(m.volunteerId)!] : r.members;
    const peers = r.mode === 'ring' ? ringNeighbours(ring, m.volunteerId) : r.mode === 'group' ? r.members.filter((id) => id !== m.volunteerId) : [];
    if (!peers.includes(e.to)) {
      throw new ProtocolError('not_neighbour', `${e.to} is not a ${r.mode === 'group' ? 'group member' : 'ring neighbour'} of ${m.volunteerId} in round ${r.roundId}`);
    }
    this.deps.toVolunteer(e.to, 'signal', { jobId: this.job.id, roundId: e.roundId, from: m.volunteerId, data: e.data });
    return {};
  }

  /** A joiner's round trips to its probe peers (join-probes.ts): kept to those, once. */
  private onProbeReport(m: Member, e: VolunteerEventParsed<'peers:rtt'>): object {
    const kept = this.probes.take(m.volunteerId, e.rttMs);
    if (!kept) throw new ProtocolError('conflict', 'no probe is open: peers:rtt answers the probePeers of an assignment, once');
    this.distances.record(m.volunteerId, kept);
    return { kept: Object.keys(kept).length };
  }

  private onStarUpdate(m: Member, e: VolunteerEventParsed<'star:update'>): object {
    const r = this.currentRound(m, e.roundId);
    if (r.mode !== 'star') throw new ProtocolError('conflict', `round ${r.roundId} is a ring round`);
    if (r.starUpdates.has(m.volunteerId)) throw new ProtocolError('conflict', 'update already received for this round');
    r.starUpdates.set(m.volunteerId, decodeUpdate(e.data, flatLengthOf(this.job.spec)));
    if (r.starUpdates.size === r.members.length) this.sendStarResult(r);
    return {};
  }

  /**
   * The uploader's checkpoint: refused (and the uploader evicted) unless it is the job's model; kept
   * until the sync's evaluators agree on the model's checksum, then stored only if it matches.
   */
  private onUpload(m: Member, e: VolunteerEventParsed<'checkpoint:upload'>): object {
    const p = this.pendingUpload;
    if (!p || p.uploader !== m.volunteerId || p.seq !== e.seq || p.received) throw new ProtocolError('conflict', `no checkpoint of sync ${e.seq} was asked of this member`);
    let checksum: string;
    try {
      checksum = verifyCheckpoint(this.job.spec, e.data).digest;
    } catch (err) {
      this.uploaderFault(p, `sent a checkpoint that is not the job's model: ${(err as Error).message}`, 'integrity');
      throw err;
    }
    p.received = { data: e.data.slice(), checksum };
    this.settleUpload();
    return { bytes: e.data.byteLength };
  }

  /** Stores the received upload once the sync's agreed checksum is known, or refuses it. */
  private settleUpload(): void {
    const p = this.pendingUpload;
    if (!p?.received) return;
    const agreed = this.agreedChecksum(p.seq);
    if (agreed === undefined) return; // the evaluators have not agreed yet
    if (agreed === null) {
      this.loseCheckpoint(`the evaluators of sync ${p.seq} did not agree on its model, so its checkpoint cannot be verified`);
      this.tryBegin();
      return;
    }
    if (p.received.checksum !== agreed) {
      this.uploaderFault(p, `uploaded parameters with checksum ${p.received.checksum}; the evaluators of sync ${p.seq} agree on ${agreed}`, 'integrity');
      return;
    }
    const { data, checksum } = p.received;
    p.cancelTimer();
    this.pendingUpload = null;
    this.pace.record('upload', this.deps.clock.now() - p.since);
    const info: CheckpointInfo = { seq: p.seq, step: this.job.step, bytes: data.byteLength, sha256: createHash('sha256').update(data).digest('hex'), createdAt: this.deps.clock.now() };
    this.storeCheckpoint(info, data, checksum, 1);
  }

  /** The agreed checksum of a sync's model: a string, null (they cannot agree), undefined (not yet known). */
  private agreedChecksum(seq: number): string | null | undefined {
    const ev = this.evaluations.get(seq);
    if (!ev) return this.settledChecksums.get(seq) ?? this.checkpointChecksums.get(seq) ?? null;
    const majority = majorityChecksum(ev.reports, ev.asked);
    // Untrusted jobs: a majority of newcomers is known only once every evaluator spoke (weighStanding).
    if (majority && (!this.networkRulesApply || this.standingVouchers(ev, majority) >= 2)) return majority;
    if (this.networkRulesApply) return undefined;
    // Out of evaluators still to report, or too few left to make a majority: no agreement.
    const counts = new Map<string, number>();
    for (const r of ev.reports.values()) counts.set(r.checksum, (counts.get(r.checksum) ?? 0) + 1);
    const best = Math.max(0, ...counts.values());
    const outstanding = [...ev.evaluators].filter((id) => !ev.reports.has(id)).length;
    return (best + outstanding) * 2 > ev.asked ? undefined : null;
  }

  private storeCheckpoint(info: CheckpointInfo, data: Uint8Array, checksum: string, attempt: number): void {
    this.persist(async () => {
      try {
        await this.deps.store.putCheckpoint(this.job.id, info, data);
      } catch (e) {
        this.deps.log(`job ${this.job.id}: storing the checkpoint of sync ${info.seq} failed (attempt ${attempt} of ${STORE_ATTEMPTS}): ${(e as Error).message}`);
        this.deps.count('checkpoint_store_failures');
        if (attempt < STORE_ATTEMPTS) this.deps.clock.after(1_000 * attempt, () => !this.ended && this.storeCheckpoint(info, data, checksum, attempt + 1));
        else this.checkpointLost(info.seq, `the store refused it ${STORE_ATTEMPTS} times: ${(e as Error).message}`);
        return;
      }
      this.checkpointChecksums.set(info.seq, checksum);
      // Joiners are only sent the latest checkpoints.
      for (const seq of this.checkpointChecksums.keys()) if (this.checkpointChecksums.size > 8) this.checkpointChecksums.delete(seq);
      this.checkpointStored(info);
    });
  }

  /** A verified checkpoint could not be stored: the next sync is checkpointed; a job at its end fails. */
  private checkpointLost(seq: number, why: string): void {
    if (this.ended) return;
    if (seq === this.job.seq && this.job.step >= targetStepsOf(this.job.spec)) {
      this.stop(`could not store the final checkpoint: ${why}`, 'failed');
      return;
    }
    this.checkpointOwed = true;
    this.tryBegin();
  }

  /** The uploader sent something wrong: it is evicted and the next sync's checkpoint is asked of another member. */
  private uploaderFault(p: PendingUpload, why: string, fault: Fault): void {
    this.loseCheckpoint(why);
    this.evict(p.uploader, why, fault);
    this.tryBegin();
  }

  /**
   * Gives up on the pending upload. The next sync is checkpointed, by another member chosen at random;
   * after the last sync (members stop training there, so they still hold its model) another member
   * is asked for it at once.
   */
  private loseCheckpoint(why: string): void {
    const p = this.pendingUpload;
    if (!p) return;
    this.deps.log(`job ${this.job.id}: no checkpoint of sync ${p.seq}: ${why}`);
    this.deps.count('checkpoints_lost');
    this.dropPendingUpload();
    this.checkpointOwed = true;
    if (p.seq !== this.job.seq || this.job.step < targetStepsOf(this.job.spec)) return;
    const next = shuffled([...this.members.values()].filter((m) => m.phase !== 'loading' && m.volunteerId !== p.uploader))
      .sort((a, b) => this.penalties.offences(a.identity) - this.penalties.offences(b.identity))[0];
    if (!next) return;
    this.awaitUpload(p.seq, next.volunteerId, false);
    this.deps.toVolunteer(next.volunteerId, 'checkpoint:request', { jobId: this.job.id, seq: p.seq });
  }

  private onMetrics(m: Member, e: VolunteerEventParsed<'metrics'>): object {
    const ev = this.evaluations.get(e.seq);
    if (!ev || !ev.evaluators.has(m.volunteerId)) throw new ProtocolError('not_member', `not an evaluator of sync ${e.seq} (or its evaluation is closed)`);
    if (ev.reports.has(m.volunteerId)) return { duplicate: true };
    ev.reports.set(m.volunteerId, { checksum: e.checksum, accuracy: e.accuracy, loss: e.loss });
    this.pace.record('evaluate', this.deps.clock.now() - ev.since);
    this.uploadAfterEvaluation(e.seq, m.volunteerId);
    this.evaluationProgress(ev);
    return {};
  }

  /** A report came in or an evaluator left: verify a waiting upload, and close the evaluation when all are in. */
  private evaluationProgress(ev: OpenEvaluation): void {
    if (this.pendingUpload?.seq === ev.seq) this.settleUpload();
    if ([...ev.evaluators].every((id) => ev.reports.has(id))) this.finishEvaluation(ev);
  }

  /**
   * Records a sync's evaluation: the lower median of the reports of the agreed model, with how many
   * vouched for it. Evaluators that reported another model are evicted. A target accuracy ends the
   * job only when at least two members vouch for it (one, when the round had one member).
   */
  private finishEvaluation(ev: OpenEvaluation): void {
    ev.cancelTimer();
    this.evaluations.delete(ev.seq);
    const outcome = this.weighStanding(combineEvaluations(ev.reports, ev.asked), ev);
    this.settledChecksums.set(ev.seq, outcome.agreed ? outcome.checksum : null);
    for (const seq of this.settledChecksums.keys()) if (seq < ev.seq - 4) this.settledChecksums.delete(seq);
    if (!outcome.agreed) {
      this.deps.count('evaluation_disagreements');
      this.deps.log(`job ${this.job.id}: evaluation of sync ${ev.seq} not recorded: ${outcome.reason}`);
      if (this.pendingUpload?.seq === ev.seq) this.settleUpload();
      return;
    }
    for (const id of outcome.outvoted) if (!this.ended) this.evict(id, `evaluated a model (sync ${ev.seq}) other than the one its evaluators agree on`, 'integrity');
    if (outcome.accuracy !== null) this.latestAccuracy = outcome.accuracy;
    if (this.pendingUpload?.seq === ev.seq) this.settleUpload();
    const point: MetricPoint = {
      seq: ev.seq, step: ev.step, time: this.deps.clock.now(), loss: outcome.loss, accuracy: outcome.accuracy, samplesPerSec: null, bytesSent: null,
      workers: this.members.size, vouchers: outcome.vouchers,
    };
    this.persist(() => this.deps.store.addMetric(this.job.id, point));
    this.deps.toDashboards(this.job.id, 'job:metrics', { jobId: this.job.id, points: [point] });
    const target = this.job.spec.targetAccuracy;
    const vouchers = this.networkRulesApply ? this.standingVouchers(ev, outcome.checksum) : outcome.vouchers;
    const enough = vouchers >= Math.min(2, ev.asked);
    if (target !== undefined && outcome.accuracy !== null && outcome.accuracy >= target && !enough && !this.ended) {
      this.notice = `sync ${ev.seq}: accuracy ${outcome.accuracy} reaches the target ${target}, but ${vouchers} of the ${outcome.vouchers} evaluators`
        + ' who vouch for it have standing (2 needed): training goes on';
      this.deps.count('targets_unvouched');
      this.deps.log(`job ${this.job.id}: ${this.notice}`);
      this.deps.toDashboards(this.job.id, 'job:update', this.summary());
    }
    if (target !== undefined && outcome.accuracy !== null && outcome.accuracy >= target && enough && !this.finishing && !this.ended) {
      this.deps.log(`job ${this.job.id}: test accuracy ${outcome.accuracy} (${outcome.vouchers} members vouch) reached the target ${target}`);
      this.finishing = true;
      if (this.latestCheckpoint?.seq === this.job.seq && !this.pendingUpload) this.stop(`reached target accuracy ${target}`, 'done');
    }
    if (!this.ended) this.tryBegin();
  }

  /**
   * Untrusted jobs: evaluators without standing convict nobody and decide nothing alone. When the
   * reports disagree, a majority needs two members with standing behind it, else the sync's model is
   * not agreed (no checkpoint of it, no accuracy; the outvoted are not evicted).
   */
  private weighStanding(outcome: ReturnType<typeof combineEvaluations>, ev: OpenEvaluation): ReturnType<typeof combineEvaluations> {
    if (!this.networkRulesApply || !outcome.agreed || outcome.outvoted.length === 0) return outcome;
    const standing = this.standingVouchers(ev, outcome.checksum);
    if (standing >= 2) return outcome;
    this.deps.count('evaluations_unvouched');
    return { agreed: false, reason: `evaluators disagree (${outcome.outvoted.join(', ')} outvoted) and ${standing} of the majority have standing (2 needed): nobody is believed` };
  }

  /** Evaluators of `ev` with standing that reported the model `checksum`. */
  private standingVouchers(ev: OpenEvaluation, checksum: string): number {
    return [...ev.reports].filter(([id, r]) => {
      const m = this.members.get(id);
      return r.checksum === checksum && !!m && this.hasStanding(m.identity);
    }).length;
  }

  // ---------- the round clock ----------

  private tryBegin(): void {
    if (this.ended || this.round || this.pendingUpload) return;
    this.resumeIfOrphaned();
    this.evictSilent();
    // Members left out of the coming sync are not waited for.
    const ready = this.inPhase.ready.size;
    const training = this.inPhase.admitted.size - this.leftOut.size;
    if (ready + training < this.job.spec.minWorkers) return;
    if (training > 0) {
      if (ready > 0 && !this.cancelBarrier) {
        // Counted from the first ready member, or from the latest end of a budget still running
        // (and a step of the slowest member still in one).
        const now = this.deps.clock.now();
        const budgets = this.runningBudgets();
        const cap = this.deps.timing.barrierTimeoutMs;
        const boundMs = Math.min(cap, Math.round(Math.max(now, budgets.endsAt ?? now) - now + budgets.longestStepMs) + this.pace.bound('overrun', cap));
        this.cancelBarrier = this.deps.clock.after(boundMs, () => this.barrierExpired(boundMs));
      }
      return;
    }
    // Joiners loading the current model are waited for, at the pace joiners usually load; after that
    // the round goes on without them and they load the next checkpoint. (Moshpit jobs do not wait
    // once a sync is due: joiners take a later sync.)
    if (this.inPhase.loading.size > this.unsentLoads.size && !this.joinerHoldExpired && !(this.job.spec.groupSize !== undefined && this.joinersJoinLater())) {
      this.cancelJoinerHold ??= this.deps.clock.after(this.pace.bound('load', this.deps.timing.loadTimeoutMs, FIRST_LOAD_GUESS_MS), () => {
        this.cancelJoinerHold = null;
        this.joinerHoldExpired = true;
        this.tryBegin();
      });
      return;
    }
    this.cancelBarrier?.();
    this.cancelBarrier = null;
    this.cancelJoinerHold?.();
    this.cancelJoinerHold = null;
    this.joinerHoldExpired = false;
    this.begin(this.ringWithoutSitters([...this.inPhase.ready].sort((a, b) => a.shard - b.shard)));
  }

  /**
   * Moshpit jobs: past the first sync, or once the first sync's barrier is counting down (members
   * wait at it for others' work), a joiner admitted more than JOIN_GRACE_MS after the first member
   * takes a later sync. Waiting for it would hold the first sync by about that lag: it starts the
   * same first work as the others that much later. (Only syncs after the first used to: with 10,000
   * members and 5% churn a joiner came every second, each one's first work held the first sync, and
   * it began after 174 s instead of 49 s, seed against seed. A grace counted from the barrier's
   * countdown instead let joiners hold it by a whole first work, 23 s there, and cost 4 points of
   * utilization. The grace keeps volunteers that open together, a moment apart, in the first sync.)
   */
  private joinersJoinLater(): boolean {
    const now = this.deps.clock.now();
    return this.job.seq > 0 || (this.cancelBarrier !== null && now - (this.firstAdmittedAt ?? now) > JOIN_GRACE_MS);
  }

  /** Members left out of rounds that have not reported for the configured barrier timeout are evicted. */
  private evictSilent(): void {
    const now = this.deps.clock.now();
    for (const m of [...this.leftOut]) {
      if (now - m.workSince >= this.deps.timing.barrierTimeoutMs) this.evict(m.volunteerId, `not ready for ${Math.round((now - m.workSince) / 1000)} s`);
    }
  }

  /**
   * With no admitted member left, the global model of the last sync is gone with them: the job goes
   * back to its latest checkpoint (or the seed) and waiting joiners load that.
   */
  private resumeIfOrphaned(): void {
    if (this.members.size === 0 || this.inPhase.loading.size < this.members.size) return;
    const seq = this.latestCheckpoint?.seq ?? 0;
    if (seq !== this.job.seq) {
      this.deps.log(`job ${this.job.id}: every member that held sync ${this.job.seq} left; going back to ${seq ? `the checkpoint of sync ${seq}` : 'the initial model'}`);
      this.job = { ...this.job, seq, step: this.latestCheckpoint?.step ?? 0, updatedAt: this.deps.clock.now() };
      this.persist(() => this.deps.store.updateJob(this.job));
    }
    for (const m of [...this.unsentLoads]) this.sendLoad(m, seq);
  }

  /**
   * The others are ready and a member is not, past the pace-derived bound: the round goes on without
   * it (it stays a member, and reloads when it reports), unless it has been silent past the configured
   * barrier timeout, when it is evicted.
   */
  private barrierExpired(boundMs: number): void {
    this.cancelBarrier = null;
    const now = this.deps.clock.now();
    for (const m of [...this.members.values()]) {
      if (m.phase !== 'admitted') continue;
      if (now - m.workSince >= this.deps.timing.barrierTimeoutMs) {
        this.evict(m.volunteerId, `not ready for ${Math.round((now - m.workSince) / 1000)} s`);
      } else if (m.leftOutSince === null) {
        this.setLeftOut(m, now);
        this.deps.count('members_left_out');
        this.deps.log(`job ${this.job.id}: ${m.volunteerId} is left out of sync ${this.job.seq + 1}: not ready ${Math.round(now - m.workSince)} ms after it was handed work, ${boundMs} ms after the first member was`);
      }
    }
    this.tryBegin();
  }

  /**
   * Members that sit out (sitOut) are left out of the coming sync and reload the job's model after it,
   * unless that leaves fewer than the job's minimum: then nobody sits out.
   */
  private ringWithoutSitters(ready: Member[]): Member[] {
    const ring = this.withoutNetworkMajority(ready.filter((m) => !m.sitsOut));
    if (ring.length === ready.length) return ready;
    if (ring.length >= Math.max(1, this.job.spec.minWorkers)) return ring;
    this.deps.log(`job ${this.job.id}: ${ready.length - ring.length} member(s) were to sit out sync ${this.job.seq + 1}, which leaves fewer than ${this.job.spec.minWorkers}: all take part`);
    for (const m of ready) m.sitsOut = false;
    return ready;
  }

  /**
   * Untrusted jobs: one network is never a majority of a round. A join cannot make it one, but the
   * others leaving can: then its surplus members (those with standing and the earliest seats kept)
   * sit out the sync. A network alone in the job has nobody to outvote, and keeps its members.
   */
  private withoutNetworkMajority(ring: Member[]): Member[] {
    if (!this.networkRulesApply) return ring;
    const byNetwork = new Map<string, Member[]>();
    for (const m of ring) byNetwork.set(m.network, [...(byNetwork.get(m.network) ?? []), m]);
    for (const [network, ms] of byNetwork) {
      const others = ring.length - ms.length;
      if (ms.length * 2 <= ring.length || others === 0) continue;
      const surplus = [...ms].sort((a, b) => Number(this.hasStanding(b.identity)) - Number(this.hasStanding(a.identity)) || a.shard - b.shard).slice(others);
      this.sitOut(surplus.map((m) => m.volunteerId), `${ms.length} of the ${ring.length} ready members are of network ${network}: one network is never a majority of a round`);
      return ring.filter((m) => !surplus.includes(m));
    }
    return ring;
  }

  /** An accusation nobody could settle: both sides sit out the next sync (no fault recorded) and reload after it. */
  private sitOut(ids: string[], why: string): void {
    for (const id of ids) {
      const m = this.members.get(id);
      if (!m) continue;
      m.sitsOut = true;
      this.deps.count('members_sat_out');
    }
    this.deps.log(`job ${this.job.id}: ${ids.join(', ')} sit(s) out sync ${this.job.seq + 1}: ${why}`);
  }

  /** A member whose work is stale goes back to loading: the job's model of the last sync, when a checkpoint of it exists. */
  private reload(m: Member): void {
    this.setPhase(m, 'loading');
    this.setLoadSeq(m, null);
    m.stale = false;
    m.sitsOut = false;
    m.status.state = 'loading';
    if (!this.round && !this.pendingUpload && this.latestCheckpoint?.seq === this.job.seq) this.sendLoad(m, this.job.seq);
    this.changedWorkers();
  }

  /**
   * Regional Moshpit jobs: a member's locality is the near cluster its measured round trips put it in
   * (peer-distances.ts; clusters of at least half a group, since each locality starts a run of a
   * group's grid cells and smaller ones would leave most of theirs empty), else its region hint.
   */
  private localityOf(members: string[], minCluster: number): (id: string) => string | undefined {
    const near = this.distances.localities(members, minCluster);
    return (id) => {
      const cluster = near.get(id);
      if (cluster !== undefined) return `near:${cluster}`;
      const hint = this.members.get(id)?.capabilities.region;
      return hint === undefined ? undefined : `region:${hint}`;
    };
  }

  private begin(ring: Member[]): void {
    const now = this.deps.clock.now();
    const seq = this.job.seq + 1;
    // Every member took the steps the server gave it since the last sync (H, or paced: the mean of
    // theirs; ddp: one optimizer step whatever its micro-batches): that is the count, not their word.
    const steps = isPaced(this.job.spec) ? Object.fromEntries(ring.map((m) => [m.volunteerId, m.steps])) : null;
    const paced = steps && this.job.spec.strategy !== 'ddp';
    const step = this.job.step + (paced ? Math.round(ring.reduce((a, m) => a + m.steps, 0) / ring.length) : this.job.spec.H);
    const groupSize = this.job.spec.groupSize;
    const layout = {
      householdOf: this.job.spec.hierarchical ? (id: string) => this.members.get(id)?.address : undefined,
      localityOf: this.job.spec.regionalGroups ? this.localityOf(ring.map((m) => m.volunteerId), Math.ceil((groupSize ?? 2) / 2)) : undefined,
    };
    const grouped = groupSize !== undefined ? new GroupedSync(ring.map((m) => m.volunteerId), seq, groupSize, this.job.spec.seed, this.nextRoundId, layout) : null;
    // Moshpit groups are rings of parameters, with no star path: a failing group fails alone.
    const mode: RoundBegin['mode'] = grouped ? 'ring' : this.starNext || this.ringFailures >= RING_FAILURES_BEFORE_STAR ? 'star' : this.job.spec.trust === 'untrusted' ? 'group' : 'ring';
    const dtype = mode === 'ring' && this.autoSync?.choice?.dtype === 'f16' ? ('f16' as const) : undefined;
    // Moshpit joiners load whatever checkpoint they were sent (an older model is fine); others need this sync's.
    const joinersWaiting = (grouped ? this.unsentLoads : this.inPhase.loading).size > 0;
    const final = step >= targetStepsOf(this.job.spec) || this.finishing;
    const wantCheckpoint = joinersWaiting || final || this.checkpointOwed || seq % this.job.spec.checkpointEvery === 0;
    const every = this.job.spec.evalEverySteps;
    const evaluate = wantCheckpoint || Math.floor(step / every) > Math.floor(this.job.step / every);
    // Chosen at random, so no seat in the ring (the first joiner, shard 0) is always the one trusted;
    // members with no faults on record first.
    const ranked = shuffled(ring).sort((a, b) => this.penalties.offences(a.identity) - this.penalties.offences(b.identity));
    // Moshpit: the evaluators share the uploader's group, so they vouch for the model it uploads.
    const inGroup = grouped ? ranked.filter((m) => grouped.groupOf(m.volunteerId) === grouped.groupOf(ranked[0].volunteerId)) : ranked;
    // Untrusted: members with standing first, never two seats from one network (one address was the
    // evaluators' majority: it ended a job on a forged 0.99 and evicted the honest evaluator).
    const byTrust = this.networkRulesApply ? seatsFrom(inGroup, EVALUATORS, (m) => m.network, (m) => this.hasStanding(m.identity)) : inGroup;
    const members = ring.map((m) => m.volunteerId);
    const roundId = grouped?.lastRoundId ?? this.nextRoundId;
    this.nextRoundId = roundId + 1;
    const timeoutMs = this.pace.bound('round', this.deps.timing.roundTimeoutMs);
    const deadline = now + timeoutMs;
    this.round = {
      roundId, seq, mode, members, uploader: wantCheckpoint ? byTrust[0].volunteerId : null,
      evaluators: evaluate ? byTrust.slice(0, EVALUATORS).map((m) => m.volunteerId) : [], step,
      startedAt: now, results: new Map(), failures: new Map(), starUpdates: new Map(), starSent: false, removeAtCommit: [], validation: null, disputes: null, steps, dtype, groups: grouped,
      cancelDeadline: this.deps.clock.after(timeoutMs, () => this.deadlinePassed(roundId)),
    };
    if (this.job.state === 'waiting') this.job = { ...this.job, state: 'running', updatedAt: now };
    for (const m of ring) m.status.state = 'syncing';
    this.saveRound(this.round, 'running', '');
    const common = { jobId: this.job.id, seq, mode, began: now, deadline, uploader: this.round.uploader, evaluators: this.round.evaluators };
    if (grouped) {
      // Paced: each group weighs its members' parameters by the steps they took (the weights of its own mean only).
      grouped.groups.forEach((g, i) => this.deps.toVolunteer(g, 'round:begin', { ...common, roundId: grouped.roundIdOf(i), members: g, quorum: g.length, grouped: true, ...(steps ? { steps: Object.fromEntries(g.map((id) => [id, steps[id]])) } : {}) }));
    } else {
      this.deps.toVolunteer(members, 'round:begin', { ...common, roundId, members, quorum: members.length, ...(steps ? { steps } : {}), ...(dtype ? { dtype } : {}) });
    }
    this.deps.count('rounds_begun', { mode });
  }

  private deadlinePassed(roundId: number): void {
    const r = this.round;
    if (!r || r.roundId !== roundId) return;
    const silent = r.members.filter((id) => !r.failures.has(id) && this.owes(r, id) && (!r.groups || r.groups.state[r.groups.groupOf(id)!] === 'running'));
    if (r.groups) {
      // Only the groups still running fail; their silent members are evicted.
      for (const g of r.groups.running()) this.failGroup(r, g, `deadline passed; silent: ${r.groups.groups[g].filter((id) => silent.includes(id)).join(', ') || 'none'}`, silent);
      for (const id of silent) this.evict(id, `missed the deadline of round ${r.groups.roundIdOf(r.groups.groupOf(id)!)}`);
      this.tryBegin();
      return;
    }
    if (r.mode !== 'star') this.ringFailures++;
    this.abortRound(`deadline passed; silent: ${silent.join(', ') || 'none'}`, silent);
    for (const id of silent) this.evict(id, `missed the deadline of round ${roundId}`);
    this.tryBegin();
  }

  /** Aborts the round (nothing is applied), removes the members it blames, and forms a new one without them. */
  private rejectRound(r: ActiveRound, liars: string[], why: string, fault = why): void {
    this.abortRound(why, liars);
    for (const id of liars) this.evict(id, `round ${r.roundId}: ${fault}`, 'integrity');
    this.tryBegin();
  }

  /** Whether the round still waits on `id`: its update or result, its validation, its evidence. */
  private owes(r: ActiveRound, id: string): boolean {
    if (r.mode === 'star' && !r.starSent) return !r.starUpdates.has(id);
    return !r.results.has(id) || GroupRoundChecks.owes(r, id);
  }

  private abortRound(reason: string, lost: string[]): void {
    const r = this.round;
    if (!r) return;
    r.cancelDeadline();
    this.round = null;
    // A Moshpit sync some of whose groups committed stays committed (the job's seq moved with them).
    const someCommitted = (r.groups?.committed().length ?? 0) > 0;
    if (someCommitted) this.saveRound(r, 'committed', `${r.groups!.summary()}; the rest aborted: ${reason}`);
    else this.saveRound(r, 'aborted', reason);
    if (r.groups) {
      for (const g of r.groups.running()) this.deps.toVolunteer(r.groups.groups[g].filter((id) => !lost.includes(id)), 'round:abort', { jobId: this.job.id, roundId: r.groups.roundIdOf(g), reason, lost });
    } else {
      this.deps.toVolunteer(r.members.filter((id) => !lost.includes(id)), 'round:abort', { jobId: this.job.id, roundId: r.roundId, reason, lost });
    }
    this.deps.count('rounds_aborted');
    this.deps.log(`job ${this.job.id}: round ${r.roundId} (sync ${r.seq}) aborted: ${reason}`);
  }

  private sendStarResult(r: ActiveRound): void {
    // In the round's member order, so the result does not depend on who sent first.
    const senders = r.members.filter((id) => r.starUpdates.has(id));
    const updates = senders.map((id) => r.starUpdates.get(id)!);
    // The same screening and rules as a group's owners (protocol's robust.ts).
    const { accepted, refused } = screenContributions(updates, updates[0].length);
    for (const x of refused) {
      this.deps.count('updates_rejected', { reason: 'norm' });
      this.deps.log(`job ${this.job.id}: round ${r.roundId}: refused the star update of ${senders[x.index]}: ${x.reason}`);
    }
    const rejected = refused.length;
    // Paced: weighted by samples (capped at the median weight in untrusted jobs), as the ring and the group weigh them.
    const stepsOf = r.steps && senders.map((id) => r.steps![id]);
    const weights = stepsOf && (this.job.spec.trust === 'untrusted' ? cappedWeights(stepsOf) : stepsOf);
    const result = aggregateWith(this.job.spec.aggregation, accepted.map((i) => updates[i]), { trimFraction: this.job.spec.trimFraction, ...(weights ? { weights: accepted.map((i) => weights[i]) } : {}) });
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
    const step = r.step;
    this.pace.record('round', now - r.startedAt);
    if (r.mode === 'ring') this.autoSync?.measured(r.dtype ?? 'f32', now - r.startedAt);
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
      // Counted from what the server saw: the steps it gave (of the job's batch, or paced ddp's micro-batches), and the time from being handed work to being ready.
      const steps = r.steps?.[id] ?? this.job.spec.H;
      // A member that owes the upload of a replicated unit (its work this sync) is credited once it uploads.
      const samples = steps * samplesPerStep(this.job.spec), workMs = m.workMs;
      this.replication.credit(id, r.seq, () => this.contributors.credit(m.identity, samples, workMs, now));
      const share = r.steps ? steps / Object.values(r.steps).reduce((a, b) => a + b, 0) : null;
      this.setPhase(m, 'admitted');
      Object.assign(m, { lastRound: r.roundId, lastRoundMs: now - r.startedAt, workSince: now, workMs: 0, share });
    }
    // The next sync's steps, from the paces measured in this one (auto: and its H and precision).
    this.autoSync?.choose(this.fastestPace());
    const nextSteps: Record<string, number> = {};
    const budget = this.stepBudget();
    for (const id of r.members) {
      const m = this.members.get(id);
      if (m) nextSteps[id] = m.steps = this.plannedSteps(m, budget);
    }
    const cut = this.cutToTarget(nextSteps);
    this.handBudgets(r.members, cut ? null : budget);
    // Scored only across syncs of the same members: a member joining or left out changes what a sync waits for.
    if (this.syncTimeMembers !== r.members.join(',')) this.syncTime.reset();
    this.syncTimeMembers = r.members.join(',');
    const exchangeMs = this.autoSync?.choice ? this.autoSync.predictedExchangeMs(this.autoSync.choice.dtype) : this.pace.median('round');
    this.syncTime.committed(now, r.members.flatMap((id) => this.members.get(id) ?? []).map((m) => ({ steps: m.steps, msPerStep: m.msPerStep })), exchangeMs);
    // Members left out of this sync hold work for the model before it: dropped (see docs/protocol.md).
    const leftOut = [...this.members.values()].filter((m) => !r.members.includes(m.volunteerId) && m.phase !== 'loading');
    for (const m of leftOut) m.stale = true;
    // Before the commit, so a member given a unit trains it as the next sync's work.
    this.replication.schedule(r.seq, r.members, (id) => (isPaced(this.job.spec) ? nextSteps[id] : undefined));
    this.deps.toVolunteer(r.members, 'round:commit', { jobId: this.job.id, roundId: r.roundId, seq: r.seq, step, ...(isPaced(this.job.spec) ? { steps: nextSteps, ...(cut ? {} : this.localBudget(budget)) } : {}) });
    this.deps.count('rounds_committed', { mode: r.mode });
    this.deps.toDashboards(this.job.id, 'job:update', this.summary());
    this.deps.toDashboards(this.job.id, 'job:metrics', { jobId: this.job.id, points: [point] });
    for (const x of r.removeAtCommit) this.evict(x.member, x.reason, 'integrity');
    this.changedWorkers();
    for (const m of leftOut) if (m.phase === 'ready') this.reload(m);
    // Joiners told to load an older model now need this one.
    // Their load timer stops: they wait for the server now, and get a new one with the next model.
    for (const m of this.members.values()) {
      if (m.phase === 'loading' && m.loadSeq !== null && m.loadSeq < r.seq) {
        this.setLoadSeq(m, null);
        m.cancelLoadTimer?.();
        m.cancelLoadTimer = null;
      }
    }
    const evaluators = r.evaluators.filter((id) => this.members.has(id));
    if (evaluators.length) this.openEvaluation(r.seq, step, evaluators);
    if (r.uploader && this.members.has(r.uploader)) {
      this.awaitUpload(r.seq, r.uploader, evaluators.includes(r.uploader));
    } else if (step >= targetStepsOf(this.job.spec)) {
      this.stop(`reached ${step} steps`, 'done');
    } else {
      this.tryBegin();
    }
  }

  /**
   * A Moshpit group has every result: it commits at once and its members go back to training. The
   * first group to commit advances the job to the sync; the uploader's group opens the evaluation and
   * the checkpoint (they are of its model).
   */
  private commitGroup(r: ActiveRound, g: number): void {
    const gs = r.groups!;
    gs.state[g] = 'committed';
    const now = this.deps.clock.now();
    const ids = gs.groups[g];
    const checksums = new Set(ids.map((id) => r.results.get(id)!.checksum));
    if (checksums.size > 1) {
      this.deps.count('checksum_mismatches');
      this.deps.log(`job ${this.job.id}: members of group round ${gs.roundIdOf(g)} disagree after sync ${r.seq}: ${[...checksums].join(', ')}`);
    }
    gs.lastCommitAt = now;
    if (this.job.seq < r.seq) {
      this.job = { ...this.job, seq: r.seq, step: r.step, updatedAt: now };
      this.ringFailures = 0;
      this.persist(() => this.deps.store.updateJob(this.job));
    }
    // One budget for the whole sync: members that commit later must not plan by other paces.
    const budget = (gs.budgetMs ??= this.stepBudget());
    const groupSteps = r.steps && ids.reduce((a, id) => a + r.steps![id], 0);
    const nextSteps: Record<string, number> = {};
    for (const id of ids) {
      const m = this.members.get(id);
      if (!m) continue;
      const steps = r.steps?.[id] ?? this.job.spec.H;
      this.contributors.credit(m.identity, steps * samplesPerStep(this.job.spec), m.workMs, now);
      this.setPhase(m, 'admitted');
      Object.assign(m, { lastRound: gs.roundIdOf(g), lastRoundMs: now - r.startedAt, workSince: now, workMs: 0, share: groupSteps ? steps / groupSteps : null });
      nextSteps[id] = m.steps = this.plannedSteps(m, budget);
    }
    const cut = this.cutToTarget(nextSteps);
    this.handBudgets(ids, r.steps && !cut ? budget : null);
    this.deps.toVolunteer(ids, 'round:commit', { jobId: this.job.id, roundId: gs.roundIdOf(g), seq: r.seq, step: r.step, ...(r.steps ? { steps: nextSteps, ...(cut ? {} : this.localBudget(budget)) } : {}) });
    this.deps.count('groups_committed');
    const evaluators = r.evaluators.filter((id) => ids.includes(id) && this.members.has(id));
    if (evaluators.length) this.openEvaluation(r.seq, r.step, evaluators);
    if (r.uploader && ids.includes(r.uploader) && this.members.has(r.uploader)) {
      this.awaitUpload(r.seq, r.uploader, evaluators.includes(r.uploader));
    }
    this.changedWorkers();
    if (gs.settled()) this.finishGroupedSync(r);
  }

  /** A Moshpit group cannot finish: it alone is aborted, and its members keep their work for the next sync. */
  private failGroup(r: ActiveRound, g: number, reason: string, lost: string[]): void {
    const gs = r.groups!;
    gs.state[g] = 'failed';
    this.deps.toVolunteer(gs.groups[g].filter((id) => !lost.includes(id) && this.members.has(id)), 'round:abort', { jobId: this.job.id, roundId: gs.roundIdOf(g), reason, lost });
    this.deps.count('groups_failed');
    this.deps.log(`job ${this.job.id}: group round ${gs.roundIdOf(g)} of sync ${r.seq} failed: ${reason}`);
    if (gs.settled()) this.finishGroupedSync(r);
  }

  /** Every group of a Moshpit sync has settled: the sync is recorded, and the next one may begin. */
  private finishGroupedSync(r: ActiveRound): void {
    const gs = r.groups!;
    r.cancelDeadline();
    this.round = null;
    const committed = gs.committed();
    if (!committed.length) {
      this.ringFailures++;
      this.saveRound(r, 'aborted', `every group failed (${gs.groups.length})`);
      this.deps.count('rounds_aborted');
      this.tryBegin();
      return;
    }
    const now = this.deps.clock.now();
    // The sync's exchange: its slowest group (the next deadline and a paced budget follow it).
    this.pace.record('round', gs.lastCommitAt! - r.startedAt);
    this.saveRound(r, 'committed', gs.summary());
    const results = committed.flatMap((id) => r.results.get(id) ?? []);
    const losses = results.map((x) => x.metrics.loss).filter((x): x is number => x !== null);
    const point: MetricPoint = {
      seq: r.seq, step: r.step, time: now, loss: losses.length ? losses.reduce((a, b) => a + b, 0) / losses.length : null, accuracy: null,
      samplesPerSec: results.reduce((sum, x) => sum + (x.metrics.wallMs > 0 ? (x.metrics.samples * 1000) / x.metrics.wallMs : 0), 0),
      bytesSent: results.reduce((sum, x) => sum + x.metrics.bytesSent, 0), workers: committed.length,
    };
    this.persist(() => this.deps.store.addMetric(this.job.id, point));
    this.deps.count('rounds_committed', { mode: 'grouped' });
    this.deps.toDashboards(this.job.id, 'job:update', this.summary());
    this.deps.toDashboards(this.job.id, 'job:metrics', { jobId: this.job.id, points: [point] });
    // A checkpoint this sync was to give, whose group failed, is owed by the next.
    if (r.uploader && !committed.includes(r.uploader)) this.checkpointOwed = true;
    // Joiners loading an older model go on loading it: a Moshpit member's model may be a sync old.
    if (!this.pendingUpload && r.step >= targetStepsOf(this.job.spec)) this.stop(`reached ${r.step} steps`, 'done');
    else this.tryBegin();
  }

  /** A checkpoint of `seq` is stored: joiners load it, and a finishing job ends. */
  private checkpointStored(info: CheckpointInfo): void {
    const seq = info.seq;
    if (seq === this.job.seq) this.checkpointOwed = false;
    if (!this.latestCheckpoint || seq >= this.latestCheckpoint.seq) this.latestCheckpoint = info;
    this.deps.toDashboards(this.job.id, 'job:update', this.summary());
    if (this.ended) return;
    if (seq === this.job.seq && (this.finishing || this.job.step >= targetStepsOf(this.job.spec))) {
      this.stop(this.finishing ? `reached target accuracy ${this.job.spec.targetAccuracy}` : `reached ${this.job.step} steps`, 'done');
      return;
    }
    if (seq === this.job.seq) for (const m of [...this.unsentLoads]) this.sendLoad(m, seq);
    this.tryBegin();
  }

  /**
   * Waits for a sync's checkpoint from its uploader. An uploader that also evaluates the sync uploads
   * after its evaluation, so until it reports that, its deadline is the evaluation's plus the upload's;
   * its report restarts the clock (`uploadAfterEvaluation`). Timing the upload from the commit
   * instead evicted uploaders whose evaluation was slow under load.
   */
  private awaitUpload(seq: number, uploader: string, evaluatesFirst: boolean): void {
    const ms = this.uploadTimeoutMs() + (evaluatesFirst ? this.pace.bound('evaluate', this.deps.timing.loadTimeoutMs) : 0);
    this.pendingUpload = { seq, uploader, since: this.deps.clock.now(), received: null, cancelTimer: this.deps.clock.after(ms, () => this.uploadTimedOut()) };
  }

  /** The uploader reported its evaluation: its upload is timed from now. */
  private uploadAfterEvaluation(seq: number, volunteerId: string): void {
    const p = this.pendingUpload;
    if (!p || p.seq !== seq || p.uploader !== volunteerId || p.received) return;
    p.cancelTimer();
    p.since = this.deps.clock.now();
    p.cancelTimer = this.deps.clock.after(this.uploadTimeoutMs(), () => this.uploadTimedOut());
  }

  /** Bounded by the pace of earlier uploads; before any, by the configured maximum. */
  private uploadTimeoutMs(): number {
    return this.pace.bound('upload', this.deps.timing.loadTimeoutMs);
  }

  private uploadTimedOut(): void {
    const p = this.pendingUpload;
    if (!p) return;
    // Arrived but not yet verifiable (the evaluators are late): not the uploader's fault.
    if (p.received) this.loseCheckpoint(`its evaluators did not agree on the model of sync ${p.seq} in time`);
    else this.uploaderFault(p, `did not upload the checkpoint of sync ${p.seq} in time`, 'liveness');
    this.tryBegin();
  }

  private openEvaluation(seq: number, step: number, evaluators: string[]): void {
    const ev: OpenEvaluation = {
      seq, step, asked: evaluators.length, since: this.deps.clock.now(), evaluators: new Set(evaluators), reports: new Map(),
      cancelTimer: this.deps.clock.after(this.pace.bound('evaluate', this.deps.timing.loadTimeoutMs), () => {
        for (const id of ev.evaluators) if (!ev.reports.has(id)) this.evict(id, `did not report its evaluation of sync ${seq} in time`);
        if (this.evaluations.get(seq) === ev) this.finishEvaluation(ev);
      }),
    };
    this.evaluations.set(seq, ev);
  }

  private dropPendingUpload(): void {
    this.pendingUpload?.cancelTimer();
    this.pendingUpload = null;
  }

  private sendLoad(m: Member, seq: number): void {
    this.setLoadSeq(m, seq);
    m.cancelLoadTimer?.();
    m.loadSince = this.deps.clock.now();
    m.cancelLoadTimer = this.deps.clock.after(this.pace.bound('load', this.deps.timing.loadTimeoutMs), () => {
      this.evict(m.volunteerId, 'model load timed out');
      this.tryBegin();
    });
    const url = seq === 0 && this.latestCheckpoint === null ? null : this.deps.checkpointUrl(this.job.id, seq);
    this.deps.toVolunteer(m.volunteerId, 'model:load', { jobId: this.job.id, seq, step: this.job.step, url });
  }

  // ---------- helpers ----------

  /** A member's local steps for its next work: H, or paced, what fits the round's budget at its pace. */
  private plannedSteps(m: Member, budget?: number | null): number {
    // Unpaced, or its pace not measured yet (a joiner): a few steps or the nominal, with no budget to compute.
    if (!isPaced(this.job.spec) || m.msPerStep === null) return unmeasuredSteps(this.job.spec);
    return stepsFor(this.job.spec, m.msPerStep, budget === undefined ? this.stepBudget() : budget);
  }

  /**
   * Paced LocalSGD and DiLoCo: the syncs before the job's target are cut to it. When a member could
   * pass the target in its coming work (up to the ceiling of the steps it is given), the members in
   * `steps` get no budget (each does exactly its steps), and where their mean would pass the steps left
   * their steps are scaled down to it (protocol's cutSteps), so the job ends on its target instead of
   * past it. True when cut (`steps` and the members' planned steps may be lowered).
   */
  private cutToTarget(steps: Record<string, number>): boolean {
    if (!isPaced(this.job.spec) || this.job.spec.strategy === 'ddp') return false;
    const left = this.stepsLeft();
    if (pacedStepCeiling(Math.max(0, ...Object.values(steps)), this.job.spec.trust) < left) return false;
    const ids = Object.keys(steps);
    const cut = cutSteps(ids.map((id) => steps[id]), left);
    ids.forEach((id, i) => {
      steps[id] = cut[i];
      const m = this.members.get(id);
      if (m) m.steps = cut[i];
    });
    return true;
  }

  /** Mean steps per member before the job's target (at least one). */
  private stepsLeft(): number {
    return Math.max(1, targetStepsOf(this.job.spec) - this.job.step);
  }

  /**
   * Paced LocalSGD and DiLoCo: the time budget sent with the steps, so members stop at it (a step
   * count alone overran it whenever a member's steps ran slower than its measured pace). Paced ddp's
   * micro-batches make up one global batch: exactly those, no budget.
   */
  private localBudget(budget: number | null): { budgetMs?: number } {
    return budget !== null && this.job.spec.strategy !== 'ddp' ? { budgetMs: Math.round(budget) } : {};
  }

  /**
   * Of the budgets the members a sync waits for run: when the latest ends (null: none runs), and the
   * longest step of a member that has one (it takes at least one step, so a member slower than its
   * budget ends a step past it, not late). A member whose pace is unknown may take UNMEASURED_STEP_MS
   * for a step: its first steps hold its shader compiles.
   */
  private runningBudgets(): { endsAt: number | null; longestStepMs: number } {
    let endsAt: number | null = null, longestStepMs = 0;
    for (const m of this.inPhase.admitted) {
      if (m.workBudgetMs <= 0 || this.leftOut.has(m)) continue;
      endsAt = Math.max(endsAt ?? -Infinity, m.workSince + m.workBudgetMs);
      longestStepMs = Math.max(longestStepMs, m.msPerStep ?? UNMEASURED_STEP_MS);
    }
    return { endsAt, longestStepMs };
  }

  /** The budget the members' new work was handed (null: none), which their lateness is counted past. */
  private handBudgets(ids: readonly string[], budget: number | null): void {
    const budgetMs = this.localBudget(budget).budgetMs ?? 0;
    for (const id of ids) {
      const m = this.members.get(id);
      if (m) m.workBudgetMs = budgetMs;
    }
  }

  /**
   * The steps a member says it took when it stopped at the budget: its weight in the sync, its credit,
   * the job's step and its pace follow them. At most protocol's `pacedStepCeiling` of the steps it was
   * given (trusted: twice them; untrusted: those), so a member can lower its weight but not raise it past that.
   */
  private reportedSteps(m: Member, steps: number): number {
    if (!isPaced(this.job.spec) || this.job.spec.strategy === 'ddp') throw new ProtocolError('bad_request', 'only a paced localsgd or diloco member reports its steps: the others do the steps they are given');
    const ceiling = pacedStepCeiling(m.steps, this.job.spec.trust);
    const why = ceiling === m.steps ? 'the steps given, in an untrusted job' : `twice the ${m.steps} given`;
    if (steps > ceiling) throw new ProtocolError('bad_request', `${steps} local steps: at most ${ceiling} (${why})`);
    return steps;
  }

  /** A paced job's local compute time per sync (null: every member does H); computed over all members, so callers planning many members pass it once. */
  private stepBudget(): number | null {
    if (!isPaced(this.job.spec)) return null;
    const paces = [...this.members.values()].map((x) => x.msPerStep);
    const known = paces.filter((p): p is number => p !== null);
    return this.autoSync?.choice && known.length
      ? snappedBudgetMs(this.job.spec, known, this.autoSync.choice.H * Math.min(...known))
      : roundBudgetMs(this.job.spec, paces, this.syncTime.medianOverheadMs ?? this.pace.median('round'));
  }

  /** The smallest measured time per step among the members, or null before any is measured. */
  private fastestPace(): number | null {
    const known = [...this.members.values()].flatMap((x) => (x.msPerStep === null ? [] : [x.msPerStep]));
    return known.length ? Math.min(...known) : null;
  }

  private fits(v: VolunteerInfo): boolean {
    return v.capabilities.limits.maxStorageBufferBindingSize >= flatLengthOf(this.job.spec) * 4;
  }

  /** A member moves to `phase`; leaving 'admitted' ends its being left out. */
  private setPhase(m: Member, phase: Phase): void {
    this.inPhase[m.phase].delete(m);
    m.phase = phase;
    this.inPhase[phase].add(m);
    if (phase === 'loading' && m.loadSeq === null) this.unsentLoads.add(m);
    else this.unsentLoads.delete(m);
    if (phase !== 'admitted') this.setLeftOut(m, null);
  }

  private setLoadSeq(m: Member, seq: number | null): void {
    m.loadSeq = seq;
    if (seq === null && m.phase === 'loading') this.unsentLoads.add(m);
    else this.unsentLoads.delete(m);
  }

  private setLeftOut(m: Member, since: number | null): void {
    m.leftOutSince = since;
    if (since === null) this.leftOut.delete(m);
    else this.leftOut.add(m);
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

function shuffled<T>(xs: T[]): T[] {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = randomInt(i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/** The round trips of `rtts` to the members `self` was linked to in round `r`: its ring neighbours (in a Moshpit job, in its group's ring). */
function linkedPeersOnly(r: { members: string[]; groups?: GroupedSync | null }, self: string, rtts: Record<string, number>): Record<string, number> {
  const g = r.groups?.groupOf(self);
  const ring = r.groups && g !== undefined ? r.groups.groups[g] : r.members;
  const i = ring.indexOf(self);
  const neighbours = i < 0 || ring.length < 2 ? [] : [ring[(i + ring.length - 1) % ring.length], ring[(i + 1) % ring.length]];
  return Object.fromEntries(Object.entries(rtts).filter(([peer]) => peer !== self && neighbours.includes(peer)));
}
