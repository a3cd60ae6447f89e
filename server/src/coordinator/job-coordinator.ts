// The round clock of one job and its membership. When every admitted member is ready the
// coordinator begins a round (ring order, deadline, quorum); members report their result without
// applying it, and the round commits when all have reported. A member lost mid-round aborts the round
// and it is re-formed at once with the survivors, who still hold their local progress. All state
// changes are synchronous; persistence is queued behind them in order.
//
// No single member is believed: steps are the server's own count, checkpoints and accuracy come from
// several evaluators (checkpoints.ts), a joiner's loaded model is checked against the agreed checksum,
// and deadlines follow the members' pace (deadlines.ts). A member removed for a fault is kept out for
// a while, longer each time (penalties.ts). The modules beside it each hold one concern behind a narrow
// host: members.ts (phases), step-planner.ts (the work handed out), checkpoints.ts, grouped-sync.ts
// (Moshpit syncs), group-round.ts (untrusted group rounds), replication.ts, peer-links.ts.
import {
  flatLengthOf,
  ProtocolError,
  targetStepsOf,
  type Assignment,
  type CheckpointInfo,
  type JobSummary,
  type MetricPoint,
  type RoundBegin,
  type VolunteerEventName,
  type VolunteerEventParsed,
  type WorkerRow,
} from '@tabfleet/protocol';
import { contributorName, departedRow } from '../credit';
import type { JobRecord, RoundRecord } from '../store/store';
import { Checkpoints, EVALUATORS, type Fault } from './checkpoints';
import { ContributorLedger, describeAdapter } from './contributors';
import { Deadlines } from './deadlines';
import { reportFits } from './group-check';
import { GroupRoundChecks } from './group-round';
import { GroupedSync } from './grouped-sync';
import { MemberBook, type Member, type MemberStatus } from './members';
import { isPaced, samplesPerStep } from './pacing';
import { PeerLinks } from './peer-links';
import { Penalties } from './penalties';
import { Replication } from './replication';
import { Reputations } from './reputation';
import type { ActiveRound } from './round';
import { shuffled } from './shuffle';
import { hasStanding, networkOf, networkWouldDominate } from './standing';
import { decodeUpdate, starResult } from './star-update';
import { checksumsOf, syncPoint } from './sync-point';
import { StepPlanner } from './step-planner';
import type { CoordinatorDeps, VolunteerInfo } from './types';

/** Ring failures within one sync before that sync falls back to the star (server) path. */
const RING_FAILURES_BEFORE_STAR = 2;
/** Dashboards get the worker table at most this often. */
const WORKER_TABLE_INTERVAL_MS = 500;
/** Moshpit jobs: a joiner admitted this long after the first member, once the first sync's barrier counts down, takes sync 2. */
const JOIN_GRACE_MS = 5_000;
/** Before any joiner was timed, the round waits this long for loading joiners once the others are ready. */
const FIRST_LOAD_GUESS_MS = 30_000;

export class JobCoordinator {
  readonly members = new MemberBook();
  private round: ActiveRound | null = null;
  private nextRoundId: number;
  private ringFailures = 0;
  private starNext = false;
  private cancelBarrier: (() => void) | null = null;
  /** When the first member was admitted (to this coordinator): Moshpit joiners much later take sync 2. */
  private firstAdmittedAt: number | null = null;
  /** Loading joiners are waited for until this fires; then the round goes on without them. */
  private cancelJoinerHold: (() => void) | null = null;
  private joinerHoldExpired = false;
  private readonly deadlines = new Deadlines();
  private readonly links: PeerLinks;
  private readonly planner: StepPlanner;
  private readonly checkpoints: Checkpoints;
  private readonly penalties = new Penalties();
  private readonly groupChecks: GroupRoundChecks;
  private readonly replication: Replication;
  private readonly reputations = new Reputations((clientId, change) => this.persist(() => this.deps.store.addReputation(clientId, change)));
  private workerTableTimer: (() => void) | null = null;
  private persistQueue: Promise<void> = Promise.resolve();
  /** Everyone who has been in the job, by identity (loaded from the store, kept in step with it). */
  private readonly contributors: ContributorLedger;

  private constructor(
    private job: JobRecord,
    private readonly deps: CoordinatorDeps,
    lastRoundId: number,
    latestCheckpoint: CheckpointInfo | null,
  ) {
    this.nextRoundId = lastRoundId + 1;
    this.contributors = new ContributorLedger(job.id, deps.clock, (records) => this.persist(() => deps.store.saveContributors(records)));
    // The helpers' hosts read the job as it is when they call (it is replaced on every change).
    const self = this;
    const current = () => this.job;
    const identity = (volunteerId: string) => this.members.get(volunteerId)?.identity ?? volunteerId;
    this.links = new PeerLinks({ jobId: job.id, deps, members: this.members });
    this.planner = new StepPlanner({ get job() { return current(); }, members: this.members, deadlines: this.deadlines });
    this.checkpoints = new Checkpoints({
      get job() { return current(); }, deps, members: this.members, get ended() { return self.ended; }, get networkRulesApply() { return self.networkRulesApply; },
      deadlines: this.deadlines, hasStanding: (id) => this.hasStanding(id), offences: (id) => this.penalties.offences(id), evict: (id, why, fault) => this.evict(id, why, fault),
      tryBegin: () => this.tryBegin(), stop: (reason, state) => this.stop(reason, state), persist: (write) => this.persist(write), sendLoad: (m, seq) => this.sendLoad(m, seq),
      changed: () => this.deps.toDashboards(this.job.id, 'job:update', this.summary()),
    }, latestCheckpoint);
    this.groupChecks = new GroupRoundChecks({
      get jobId() { return current().id; },
      get spec() { return current().spec; },
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
      get jobId() { return current().id; },
      get spec() { return current().spec; },
      deps,
      members: () => this.members.holders().map((m) => ({ volunteerId: m.volunteerId, identity: m.identity, shard: m.shard })),
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
    c.checkpoints.restore(await deps.store.latestAccuracy(job.id), checkpoint && (await deps.store.readCheckpoint(job.id, checkpoint.seq)));
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
    const from = this.members.countFrom(v.address, network);
    if (v.address && share < 1) {
      const cap = Math.max(1, Math.floor(this.job.spec.maxWorkers * share));
      if (from.address >= cap) return `${from.address} of this job's slots are taken from your address (at most ${cap})`;
    }
    if (this.networkRulesApply) {
      const fromNetwork = from.network;
      if (networkWouldDominate(fromNetwork, this.members.size)) {
        return `${fromNetwork} of this job's ${this.members.size} members are from your network (${network}); one network is never a majority of an untrusted job`;
      }
    }
    return null;
  }

  /** Untrusted jobs on a server that tells networks apart: quorums count networks and need standing (standing.ts). */
  get networkRulesApply(): boolean {
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
      latestCheckpoint: this.checkpoints.latest, latestAccuracy: this.checkpoints.latestAccuracy, ...(this.job.endReason ? { endReason: this.job.endReason } : {}),
      ...(this.checkpoints.notice ? { notice: this.checkpoints.notice } : {}), syncTime: this.planner.summary(),
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
    const member = this.members.add(v, this.networkOf(v.address), this.deps.clock.now(), this.planner.initialSteps());
    this.reputations.know(member.identity, v.reputation);
    this.contributors.joined(member);
    const shard = member.shard;
    const assignment: Assignment = { job: { id: this.job.id, spec: this.job.spec }, shard: { index: shard, count: this.job.spec.maxWorkers } };
    const dataUrl = this.deps.shardUrl?.(this.job.id, this.job.spec, shard, this.job.spec.maxWorkers);
    if (dataUrl) assignment.dataUrl = dataUrl;
    if (this.job.spec.regionalGroups) this.links.probeJoiner(v.volunteerId, assignment);
    this.deps.toVolunteer(v.volunteerId, 'job:assign', assignment);
    // The model it can load now: the seed (nothing committed yet) or a checkpoint of the last sync,
    // unless a round is under way (its commit would make that model stale before the joiner is in).
    if (!this.round && this.job.seq === 0) this.sendLoad(member, 0);
    else if (!this.round && this.checkpoints.latest?.seq === this.job.seq) this.sendLoad(member, this.job.seq);
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
    this.members.remove(m);
    this.links.forget(volunteerId);
    this.replication.left(volunteerId);
    this.contributors.departed(m, reason, [...this.members.values()].some((x) => x.identity === m.identity));
    this.deps.log(`job ${this.job.id}: ${volunteerId} left (${reason})`);
    this.checkpoints.uploaderLeft(volunteerId);
    const r = this.round;
    if (r?.groups) {
      // Only its group's ring needs it; the other groups go on.
      const g = r.groups.groupOf(volunteerId);
      if (g !== undefined && r.groups.state[g] === 'running') this.failGroup(r, g, `member ${volunteerId} lost: ${reason}`, [volunteerId]);
    } else if (r?.members.includes(volunteerId)) this.abortRound(`member ${volunteerId} lost: ${reason}`, [volunteerId]);
    this.checkpoints.evaluatorLeft(volunteerId);
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
    this.checkpoints.release();
    this.workerTableTimer?.();
    this.workerTableTimer = null;
    for (const m of this.members.values()) m.cancelLoadTimer?.();
  }

  stop(reason: string, state: 'stopped' | 'done' | 'failed' = 'stopped'): void {
    if (this.ended) throw new ProtocolError('conflict', `job ${this.job.id} has already ended (${this.job.state})`);
    if (this.round) this.abortRound(reason, []);
    this.cancelBarrier?.();
    this.cancelJoinerHold?.();
    this.checkpoints.dropPendingUpload();
    this.job = { ...this.job, state, endReason: reason, updatedAt: this.deps.clock.now() };
    this.persist(() => this.deps.store.updateJob(this.job));
    // Evaluations still open are recorded with the reports in (the final sync's accuracy among them).
    this.checkpoints.closeEvaluations();
    for (const m of this.members.clear()) {
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
      case 'signal': return this.links.signal(m.volunteerId, payload as VolunteerEventParsed<'signal'>, () => this.currentRound(m, (payload as { roundId: number }).roundId));
      case 'peers:rtt': return this.links.probeReport(m.volunteerId, payload as VolunteerEventParsed<'peers:rtt'>);
      case 'star:update': return this.onStarUpdate(m, payload as VolunteerEventParsed<'star:update'>);
      case 'checkpoint:upload': return this.checkpoints.onUpload(m, payload as VolunteerEventParsed<'checkpoint:upload'>);
      case 'metrics': return this.checkpoints.onMetrics(m, payload as VolunteerEventParsed<'metrics'>);
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
    const expected = this.checkpoints.checksumOf(e.seq);
    if (expected && e.checksum !== expected) {
      const why = `loaded a model with checksum ${e.checksum}; the checkpoint of sync ${e.seq} holds ${expected}`;
      this.evict(m.volunteerId, why, 'integrity');
      this.tryBegin();
      throw new ProtocolError('bad_tensor', why);
    }
    m.cancelLoadTimer?.();
    m.cancelLoadTimer = null;
    this.deadlines.record('load', this.deps.clock.now() - m.loadSince);
    // A Moshpit member's model may be a sync old: the groups average it in like any other.
    const grouped = this.job.spec.groupSize !== undefined;
    if (e.seq !== this.job.seq && !grouped) {
      // A sync committed while it loaded; it needs the newer model.
      this.members.setLoadSeq(m, null);
      if (this.checkpoints.latest?.seq === this.job.seq && !this.round) this.sendLoad(m, this.job.seq);
      return { admitted: false };
    }
    this.members.setPhase(m, 'admitted');
    m.workSince = this.deps.clock.now();
    m.workBudgetMs = 0;
    this.firstAdmittedAt ??= m.workSince;
    m.status.state = 'training';
    const work = this.planner.admitted(m);
    // A Moshpit joiner mid-job starts its work after the others started theirs: the coming sync does
    // not wait for it (it joins the one after, work kept), so joiners never stall a sync of thousands.
    if (grouped && this.joinersJoinLater()) this.members.setLeftOut(m, m.workSince);
    this.changedWorkers();
    this.tryBegin();
    return { admitted: true, ...work };
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
    else if (e.steps !== undefined) m.steps = this.planner.reportedSteps(m, e.steps);
    this.members.setPhase(m, 'ready');
    // Time on the job's work as the server sees it; a member slower than the barrier is evicted anyway.
    m.workMs = Math.min(this.deps.clock.now() - m.workSince, this.deps.timing.barrierTimeoutMs);
    // The barrier's pace is how far members run past their budgets (all their work when they have
    // none): a paced job's budgets change from sync to sync, their overruns much less.
    this.deadlines.record('overrun', Math.max(0, m.workMs - m.workBudgetMs));
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
    if (e.rttMs && this.job.spec.regionalGroups) this.links.roundTrips(r, m.volunteerId, e.rttMs);
    // `e.step` is the member's own count: the job's step is the server's (r.step), whatever it says.
    this.planner.measured(m, r.steps?.[m.volunteerId], e.metrics.computeMs ?? e.metrics.wallMs);
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

  private onStarUpdate(m: Member, e: VolunteerEventParsed<'star:update'>): object {
    const r = this.currentRound(m, e.roundId);
    if (r.mode !== 'star') throw new ProtocolError('conflict', `round ${r.roundId} is a ring round`);
    if (r.starUpdates.has(m.volunteerId)) throw new ProtocolError('conflict', 'update already received for this round');
    r.starUpdates.set(m.volunteerId, decodeUpdate(e.data, flatLengthOf(this.job.spec)));
    if (r.starUpdates.size === r.members.length) this.sendStarResult(r);
    return {};
  }

  // ---------- the round clock ----------

  private tryBegin(): void {
    if (this.ended || this.round || this.checkpoints.uploadPending) return;
    this.resumeIfOrphaned();
    this.evictSilent();
    // Members left out of the coming sync are not waited for.
    const ready = this.members.inPhase.ready.size;
    const training = this.members.inPhase.admitted.size - this.members.leftOut.size;
    if (ready + training < this.job.spec.minWorkers) return;
    if (training > 0) {
      if (ready > 0 && !this.cancelBarrier) {
        // Counted from the first ready member, or from the latest end of a budget still running
        // (and a step of the slowest member still in one).
        const now = this.deps.clock.now();
        const budgets = this.planner.runningBudgets();
        const cap = this.deps.timing.barrierTimeoutMs;
        const boundMs = Math.min(cap, Math.round(Math.max(now, budgets.endsAt ?? now) - now + budgets.longestStepMs) + this.deadlines.bound('overrun', cap));
        this.cancelBarrier = this.deps.clock.after(boundMs, () => this.barrierExpired(boundMs));
      }
      return;
    }
    // Joiners loading the current model are waited for, at the pace joiners usually load; after that
    // the round goes on without them and they load the next checkpoint. (Moshpit jobs do not wait
    // once a sync is due: joiners take a later sync.)
    if (this.members.inPhase.loading.size > this.members.unsentLoads.size && !this.joinerHoldExpired && !(this.job.spec.groupSize !== undefined && this.joinersJoinLater())) {
      this.cancelJoinerHold ??= this.deps.clock.after(this.deadlines.bound('load', this.deps.timing.loadTimeoutMs, FIRST_LOAD_GUESS_MS), () => {
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
    this.begin(this.ringWithoutSitters([...this.members.inPhase.ready].sort((a, b) => a.shard - b.shard)));
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
    for (const m of [...this.members.leftOut]) {
      if (now - m.workSince >= this.deps.timing.barrierTimeoutMs) this.evict(m.volunteerId, `not ready for ${Math.round((now - m.workSince) / 1000)} s`);
    }
  }

  /**
   * With no admitted member left, the global model of the last sync is gone with them: the job goes
   * back to its latest checkpoint (or the seed) and waiting joiners load that.
   */
  private resumeIfOrphaned(): void {
    if (this.members.size === 0 || this.members.inPhase.loading.size < this.members.size) return;
    const seq = this.checkpoints.latest?.seq ?? 0;
    if (seq !== this.job.seq) {
      this.deps.log(`job ${this.job.id}: every member that held sync ${this.job.seq} left; going back to ${seq ? `the checkpoint of sync ${seq}` : 'the initial model'}`);
      this.job = { ...this.job, seq, step: this.checkpoints.latest?.step ?? 0, updatedAt: this.deps.clock.now() };
      this.persist(() => this.deps.store.updateJob(this.job));
    }
    for (const m of [...this.members.unsentLoads]) this.sendLoad(m, seq);
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
        this.members.setLeftOut(m, now);
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
    this.members.setPhase(m, 'loading');
    this.members.setLoadSeq(m, null);
    m.stale = false;
    m.sitsOut = false;
    m.status.state = 'loading';
    if (!this.round && !this.checkpoints.uploadPending && this.checkpoints.latest?.seq === this.job.seq) this.sendLoad(m, this.job.seq);
    this.changedWorkers();
  }

  private begin(ring: Member[]): void {
    const now = this.deps.clock.now();
    const seq = this.job.seq + 1;
    // Every member took the steps the server gave it since the last sync (H, or paced: the mean of
    // theirs; ddp: one optimizer step whatever its micro-batches): that is the count, not their word.
    const steps = this.planner.paced ? Object.fromEntries(ring.map((m) => [m.volunteerId, m.steps])) : null;
    const paced = steps && this.job.spec.strategy !== 'ddp';
    const step = this.job.step + (paced ? Math.round(ring.reduce((a, m) => a + m.steps, 0) / ring.length) : this.job.spec.H);
    const groupSize = this.job.spec.groupSize;
    const layout = {
      householdOf: this.job.spec.hierarchical ? (id: string) => this.members.get(id)?.address : undefined,
      localityOf: this.job.spec.regionalGroups ? this.links.localityOf(ring.map((m) => m.volunteerId), Math.ceil((groupSize ?? 2) / 2)) : undefined,
    };
    const grouped = groupSize !== undefined ? new GroupedSync(ring.map((m) => m.volunteerId), seq, groupSize, this.job.spec.seed, this.nextRoundId, layout) : null;
    // Moshpit groups are rings of parameters, with no star path: a failing group fails alone.
    const mode: RoundBegin['mode'] = grouped ? 'ring' : this.starNext || this.ringFailures >= RING_FAILURES_BEFORE_STAR ? 'star' : this.job.spec.trust === 'untrusted' ? 'group' : 'ring';
    const dtype = mode === 'ring' ? this.planner.ringDtype : undefined;
    // Moshpit joiners load whatever checkpoint they were sent (an older model is fine); others need this sync's.
    const joinersWaiting = (grouped ? this.members.unsentLoads : this.members.inPhase.loading).size > 0;
    const final = step >= targetStepsOf(this.job.spec) || this.checkpoints.finishing;
    const wantCheckpoint = joinersWaiting || final || this.checkpoints.owed || seq % this.job.spec.checkpointEvery === 0;
    const every = this.job.spec.evalEverySteps;
    const evaluate = wantCheckpoint || Math.floor(step / every) > Math.floor(this.job.step / every);
    // Moshpit: the evaluators share the uploader's group, so they vouch for the model it uploads.
    const byTrust = this.checkpoints.seats(ring, grouped && ((a, b) => grouped.groupOf(a) === grouped.groupOf(b)));
    const members = ring.map((m) => m.volunteerId);
    const roundId = grouped?.lastRoundId ?? this.nextRoundId;
    this.nextRoundId = roundId + 1;
    const timeoutMs = this.deadlines.bound('round', this.deps.timing.roundTimeoutMs);
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
    const senders = r.members.filter((id) => r.starUpdates.has(id));
    const { result, accepted, refused } = starResult(this.job.spec, senders, senders.map((id) => r.starUpdates.get(id)!), r.steps);
    for (const x of refused) {
      this.deps.count('updates_rejected', { reason: 'norm' });
      this.deps.log(`job ${this.job.id}: round ${r.roundId}: refused the star update of ${x.sender}: ${x.reason}`);
    }
    r.starSent = true;
    const data = new Uint8Array(result.buffer);
    this.deps.toVolunteer(r.members, 'star:result', { jobId: this.job.id, roundId: r.roundId, data, contributors: accepted, rejected: refused.length });
  }

  private commit(r: ActiveRound): void {
    r.cancelDeadline();
    this.round = null;
    const now = this.deps.clock.now();
    const results = [...r.results.values()];
    const step = r.step;
    this.deadlines.record('round', now - r.startedAt);
    if (r.mode === 'ring') this.planner.exchangeMeasured(r.dtype ?? 'f32', now - r.startedAt);
    this.job = { ...this.job, seq: r.seq, step, updatedAt: now };
    this.ringFailures = 0;
    this.starNext = false;
    const checksums = checksumsOf(results);
    if (checksums.length > 1) {
      this.deps.count('checksum_mismatches');
      this.deps.log(`job ${this.job.id}: members disagree after sync ${r.seq}: ${checksums.join(', ')}`);
    }
    this.saveRound(r, 'committed', checksums.length === 1 ? checksums[0] : `checksum mismatch: ${checksums.join(',')}`);
    this.persist(() => this.deps.store.updateJob(this.job));
    const point = syncPoint(r.seq, step, now, results, r.members.length);
    this.persist(() => this.deps.store.addMetric(this.job.id, point));
    this.backToWork(r, r.members, r.roundId, now, true);
    // The next sync's steps, from the paces measured in this one (auto: and its H and precision).
    const next = this.planner.nextWork(r.members);
    this.planner.predictNext(r.members, now);
    // Members left out of this sync hold work for the model before it: dropped (see docs/protocol.md).
    const leftOut = [...this.members.values()].filter((m) => !r.members.includes(m.volunteerId) && m.phase !== 'loading');
    for (const m of leftOut) m.stale = true;
    // Before the commit, so a member given a unit trains it as the next sync's work.
    this.replication.schedule(r.seq, r.members, (id) => (this.planner.paced ? next.steps[id] : undefined));
    this.deps.toVolunteer(r.members, 'round:commit', { jobId: this.job.id, roundId: r.roundId, seq: r.seq, step, ...next.order });
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
        this.members.setLoadSeq(m, null);
        m.cancelLoadTimer?.();
        m.cancelLoadTimer = null;
      }
    }
    if (this.checkpoints.committed(r.seq, step, r.evaluators, r.uploader).awaitingUpload) return;
    if (step >= targetStepsOf(this.job.spec)) this.stop(`reached ${step} steps`, 'done');
    else this.tryBegin();
  }

  /**
   * Members `ids` of a committed sync (or Moshpit group, under `roundId`) are credited and go back to
   * training. Counted from what the server saw: the steps it gave (of the job's batch, or paced ddp's
   * micro-batches), and the time from being handed work to being ready. `replicated`: a member that
   * owes the upload of a replicated unit (its work this sync) is credited once it uploads.
   */
  private backToWork(r: ActiveRound, ids: readonly string[], roundId: number, now: number, replicated: boolean): void {
    const totalSteps = r.steps && ids.reduce((a, id) => a + r.steps![id], 0);
    for (const id of ids) {
      const m = this.members.get(id);
      if (!m) continue;
      const steps = r.steps?.[id] ?? this.job.spec.H;
      const samples = steps * samplesPerStep(this.job.spec), workMs = m.workMs;
      const credit = () => this.contributors.credit(m.identity, samples, workMs, now);
      if (replicated) this.replication.credit(id, r.seq, credit);
      else credit();
      this.members.setPhase(m, 'admitted');
      Object.assign(m, { lastRound: roundId, lastRoundMs: now - r.startedAt, workSince: now, workMs: 0, share: totalSteps ? steps / totalSteps : null });
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
    const checksums = checksumsOf(ids.map((id) => r.results.get(id)!));
    if (checksums.length > 1) {
      this.deps.count('checksum_mismatches');
      this.deps.log(`job ${this.job.id}: members of group round ${gs.roundIdOf(g)} disagree after sync ${r.seq}: ${checksums.join(', ')}`);
    }
    gs.lastCommitAt = now;
    if (this.job.seq < r.seq) {
      this.job = { ...this.job, seq: r.seq, step: r.step, updatedAt: now };
      this.ringFailures = 0;
      this.persist(() => this.deps.store.updateJob(this.job));
    }
    this.backToWork(r, ids, gs.roundIdOf(g), now, false);
    // One budget for the whole sync: members that commit later must not plan by other paces.
    const next = this.planner.nextWork(ids, (gs.budgetMs ??= this.planner.stepBudget()));
    this.deps.toVolunteer(ids, 'round:commit', { jobId: this.job.id, roundId: gs.roundIdOf(g), seq: r.seq, step: r.step, ...next.order });
    this.deps.count('groups_committed');
    this.checkpoints.committed(r.seq, r.step, r.evaluators.filter((id) => ids.includes(id)), r.uploader && ids.includes(r.uploader) ? r.uploader : null);
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
    this.deadlines.record('round', gs.lastCommitAt! - r.startedAt);
    this.saveRound(r, 'committed', gs.summary());
    const point = syncPoint(r.seq, r.step, now, committed.flatMap((id) => r.results.get(id) ?? []), committed.length);
    this.persist(() => this.deps.store.addMetric(this.job.id, point));
    this.deps.count('rounds_committed', { mode: 'grouped' });
    this.deps.toDashboards(this.job.id, 'job:update', this.summary());
    this.deps.toDashboards(this.job.id, 'job:metrics', { jobId: this.job.id, points: [point] });
    // A checkpoint this sync was to give, whose group failed, is owed by the next.
    if (r.uploader && !committed.includes(r.uploader)) this.checkpoints.owed = true;
    // Joiners loading an older model go on loading it: a Moshpit member's model may be a sync old.
    if (!this.checkpoints.uploadPending && r.step >= targetStepsOf(this.job.spec)) this.stop(`reached ${r.step} steps`, 'done');
    else this.tryBegin();
  }

  private sendLoad(m: Member, seq: number): void {
    this.members.setLoadSeq(m, seq);
    m.cancelLoadTimer?.();
    m.loadSince = this.deps.clock.now();
    m.cancelLoadTimer = this.deps.clock.after(this.deadlines.bound('load', this.deps.timing.loadTimeoutMs), () => {
      this.evict(m.volunteerId, 'model load timed out');
      this.tryBegin();
    });
    const url = seq === 0 && this.checkpoints.latest === null ? null : this.deps.checkpointUrl(this.job.id, seq);
    this.deps.toVolunteer(m.volunteerId, 'model:load', { jobId: this.job.id, seq, step: this.job.step, url });
  }

  private fits(v: VolunteerInfo): boolean {
    return v.capabilities.limits.maxStorageBufferBindingSize >= flatLengthOf(this.job.spec) * 4;
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
