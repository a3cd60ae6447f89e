// The round clock of one job and its membership. When every admitted member is ready the
// coordinator begins a round (ring order, deadline, quorum); members report their result without
// applying it, and the round commits when all have reported. A member lost mid-round aborts the round
// and it is re-formed at once with the survivors, who still hold their local progress. All state
// changes are synchronous; persistence is queued behind them in order.
//
// No single member is believed: steps are the server's own count, deadlines follow the members' pace
// (deadlines.ts), and a member removed for a fault is kept out for a while, longer each time
// (penalties.ts). Each other concern is a module beside it with a narrow host: members.ts (phases),
// admission.ts (who joins, who sits out), barrier.ts (when a sync may begin), model-loads.ts,
// step-planner.ts (the work handed out), sync-commits.ts (what a commit does; Moshpit groups one by
// one), checkpoints.ts (evaluators, uploads, the target), group-round.ts (untrusted group rounds; checked-groups.ts: a Moshpit sync's),
// replication.ts, peer-links.ts (signaling, round trips, link paths) and star-update.ts (rounds through the server;
// path-fallback.ts decides when a sync takes them).
import {
  flatLengthOf, ProtocolError, targetStepsOf,
  type Assignment,
  type CheckpointInfo,
  type JobSummary,
  type RoundBegin,
  type VolunteerEventName,
  type VolunteerEventParsed,
  type WorkerRow,
} from '@tabfleet/protocol';
import type { JobRecord } from '../store/store';
import { Admission } from './admission';
import { Barrier } from './barrier';
import { Checkpoints, type Fault } from './checkpoints';
import { ContributorLedger } from './contributors';
import { Deadlines } from './deadlines';
import { reportFits } from './group-check';
import { GroupRoundChecks } from './group-round';
import { CheckedGroups } from './checked-groups';
import { GroupedSync } from './grouped-sync';
import { homeRingsApply, homesOf } from './home-rings';
import { MemberBook, type Member, type MemberStatus } from './members';
import { PathFallback } from './path-fallback';
import { ModelLoads } from './model-loads';
import { isPaced } from './pacing';
import { PeerLinks } from './peer-links';
import { Penalties } from './penalties';
import { Replication } from './replication';
import { Reputations } from './reputation';
import { evaluatorsAsked, membersWith, roundOf, unreachableClaims, type ActiveRound } from './round';
import { starUpdate } from './star-update';
import { StepPlanner } from './step-planner';
import { SyncCommits } from './sync-commits';
import { JobTally, type AbortCause } from './job-tally';
import { RoundRecords } from './round-records';
import type { CoordinatorDeps, VolunteerInfo } from './types';

/** Dashboards get the worker table at most this often. */
const WORKER_TABLE_INTERVAL_MS = 500;

export class JobCoordinator {
  readonly members = new MemberBook();
  /** What /metrics shows of this job while this node runs it. */
  readonly tally = new JobTally();
  private readonly records: RoundRecords;
  private round: ActiveRound | null = null;
  private nextRoundId: number;
  private readonly path = new PathFallback();
  private readonly deadlines = new Deadlines(() => this.deps.timing.deadlineFloorMs);
  private readonly links: PeerLinks;
  private readonly planner: StepPlanner;
  private readonly checkpoints: Checkpoints;
  private readonly barrier: Barrier;
  private readonly commits: SyncCommits;
  readonly loads: ModelLoads; // public: the HTTP side says when a member's download waits on the server (hub.ts)
  private readonly admission: Admission;
  private readonly penalties = new Penalties((records) => this.persist(() => this.deps.store.savePenalties(this.job.id, records)));
  private readonly checked: CheckedGroups;
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
    this.records = new RoundRecords(job.id, deps, (write) => this.persist(write), this.tally);
    this.contributors = new ContributorLedger(job.id, deps.clock, (records) => this.persist(() => deps.store.saveContributors(records)));
    // The helpers' hosts read the job as it is when they call (it is replaced on every change).
    const self = this;
    const current = () => this.job;
    const identity = (volunteerId: string) => this.members.get(volunteerId)?.identity ?? volunteerId;
    this.links = new PeerLinks({ jobId: job.id, deps, members: this.members, changedWorkers: () => this.changedWorkers() });
    this.admission = new Admission({
      get job() { return current(); }, deps, members: this.members, penalties: this.penalties,
      get networkRulesApply() { return self.networkRulesApply; }, hasStanding: (id) => this.hasStanding(id),
    });
    this.planner = new StepPlanner({ get job() { return current(); }, members: this.members, deadlines: this.deadlines });
    this.barrier = new Barrier({
      get job() { return current(); }, deps, members: this.members, deadlines: this.deadlines, planner: this.planner,
      evict: (id, why) => this.evict(id, why), tryBegin: () => this.tryBegin(), quorumShort: () => this.loads.seedWaitingJoiners(), hasStanding: (id) => this.hasStanding(id),
    });
    this.checkpoints = new Checkpoints({
      get job() { return current(); }, deps, members: this.members, get ended() { return self.ended; }, get networkRulesApply() { return self.networkRulesApply; }, tally: this.tally,
      deadlines: this.deadlines, hasStanding: (id) => this.hasStanding(id), offences: (id) => this.penalties.offences(id), evict: (id, why, fault) => this.evict(id, why, fault),
      tryBegin: () => this.tryBegin(), stop: (reason, state) => this.stop(reason, state), persist: (write) => this.persist(write), sendLoad: (m, seq) => this.loads.send(m, seq),
      changed: (fields) => void (fields && this.updateJob(fields), this.deps.toDashboards(this.job.id, 'job:update', this.summary())),
    }, latestCheckpoint);
    this.loads = new ModelLoads({
      get job() { return current(); }, deps, members: this.members, deadlines: this.deadlines, planner: this.planner, checkpoints: this.checkpoints, barrier: this.barrier,
      get roundRunning() { return self.round !== null; }, evict: (id, why, fault) => this.evict(id, why, fault), tryBegin: () => this.tryBegin(), changedWorkers: () => this.changedWorkers(),
      tally: this.tally, loadPeers: (joiner, holders, count) => this.links.loadPeers(joiner, holders, count),
    });
    this.commits = new SyncCommits({
      get job() { return current(); }, deps, members: this.members, deadlines: this.deadlines, planner: this.planner, checkpoints: this.checkpoints,
      get replication() { return self.replication; }, contributors: this.contributors,
      advance: (seq, step, now, mode) => {
        this.updateJob({ seq, step }, now);
        this.path.committed(mode);
        if (mode === 'star' && this.path.skippedAhead > 0) deps.log(`job ${this.job.id}: sync ${seq} went through the server; the next ${this.path.skippedAhead} skip the peer attempt`);
      },
      roundOver: (r) => {
        r.cancelDeadline();
        if (this.round === r) this.round = null;
      },
      ringFailed: () => this.path.peerRoundFailed(),
      records: this.records, tally: this.tally, persist: (write) => this.persist(write),
      evict: (id, why, fault) => this.evict(id, why, fault), reload: (m) => this.loads.reload(m), stop: (reason, state) => this.stop(reason, state),
      tryBegin: () => this.tryBegin(), changedWorkers: () => this.changedWorkers(), summary: () => this.summary(),
    });
    this.checked = new CheckedGroups({
      get jobId() { return current().id; },
      get spec() { return current().spec; },
      deps, commits: this.commits,
      rejectRound: (r, liars, why, fault) => this.rejectRound(r, liars, why, fault), evict: (id, why, fault) => this.evict(id, why, fault),
      onProbation: (volunteerId) => this.reputations.onProbation(identity(volunteerId)),
      verified: (volunteerId) => this.reputations.verified(identity(volunteerId)),
      hasStanding: (volunteerId) => this.hasStanding(identity(volunteerId)),
      sameNetwork: (a, b) => this.networkRulesApply && this.members.get(a)?.network === this.members.get(b)?.network,
      voiceOf: (volunteerId) => (this.networkRulesApply ? this.members.get(volunteerId)?.network ?? volunteerId : volunteerId),
      sitOut: (ids, why) => this.admission.sitOut(ids, why), isMember: (volunteerId) => this.members.has(volunteerId),
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
    c.penalties.restore(await deps.store.penalties(job.id));
    const contributors = await deps.store.contributors(job.id);
    // Members when the server stopped are not members now; they rejoin under the same identity.
    c.contributors.restore(contributors, await deps.store.displayNames(contributors.map((x) => x.clientId)));
    c.records.abortLeftRunning(rounds);
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
    return !this.ended && this.members.size < this.job.spec.maxWorkers && this.admission.fits(v) && this.admission.refusal(v) === null;
  }

  /** Untrusted jobs on a server that tells networks apart: quorums count networks and need standing (standing.ts). */
  get networkRulesApply(): boolean {
    return !!this.deps.networkRules && this.job.spec.trust === 'untrusted';
  }

  /** Checks confirmed enough of this identity's work since its last fault (it may evaluate, upload, break ties). */
  private hasStanding(identity: string): boolean {
    return !this.reputations.onProbation(identity);
  }

  summary(): JobSummary {
    return {
      ...this.job, workers: this.members.size, latestCheckpoint: this.checkpoints.latest, latestAccuracy: this.checkpoints.latestAccuracy,
      syncTime: this.planner.summary(), links: this.links.paths.summary(),
    };
  }

  /** The members, then everyone who contributed and is no longer in the job (state `left`). */
  workers(): WorkerRow[] {
    return this.contributors.table(this.members.values(), isPaced(this.job.spec), this.penalties, (id) => this.reputations.row(id), this.links.paths);
  }

  /** Waits until everything queued so far (contributor totals too, unless `contributors` is false) is in the store. */
  flushed(contributors = true): Promise<void> {
    if (contributors) this.contributors.flush();
    return this.persistQueue;
  }

  join(v: VolunteerInfo): Assignment {
    if (this.ended) throw new ProtocolError('conflict', `job ${this.job.id} has ended (${this.job.state})`);
    if (this.members.has(v.volunteerId)) throw new ProtocolError('conflict', `already a member of job ${this.job.id}`);
    if (this.members.size >= this.job.spec.maxWorkers) throw new ProtocolError('capacity', `job ${this.job.id} has its ${this.job.spec.maxWorkers} workers`);
    if (!this.admission.fits(v)) throw new ProtocolError('capacity', `this adapter cannot hold the ${this.job.spec.preset} model`);
    const refusal = this.admission.refusal(v);
    if (refusal) throw new ProtocolError('rate_limited', `job ${this.job.id}: ${refusal}`);
    const member = this.members.add(v, this.admission.networkOf(v.address), this.deps.clock.now(), this.planner.initialSteps());
    this.reputations.know(member.identity, v.reputation);
    this.contributors.joined(member);
    const shard = member.shard;
    const assignment: Assignment = { job: { id: this.job.id, spec: this.job.spec }, shard: { index: shard, count: this.job.spec.maxWorkers } };
    const dataUrl = this.deps.shardUrl?.(this.job.id, this.job.spec, shard, this.job.spec.maxWorkers);
    if (dataUrl) assignment.dataUrl = dataUrl;
    this.links.issueIce(v.volunteerId, assignment);
    if (this.job.spec.regionalGroups) this.links.probeJoiner(v.volunteerId, assignment);
    this.deps.toVolunteer(v.volunteerId, 'job:assign', assignment);
    this.loads.sendIfReady(member);
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
      if (g !== undefined && r.groups.state[g] === 'running') this.commits.failGroup(r, g, `member ${volunteerId} lost: ${reason}`, [volunteerId]);
    } else if (r?.members.includes(volunteerId)) this.abortRound(`member ${volunteerId} lost: ${reason}`, [volunteerId], 'member_lost');
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
    this.tally.evicted(fault);
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
    this.barrier.cancel();
    this.checkpoints.release();
    this.workerTableTimer?.();
    this.workerTableTimer = null;
    this.links.release();
    for (const m of this.members.values()) m.cancelLoadTimer?.();
  }

  private updateJob(fields: Partial<JobRecord>, now = this.deps.clock.now()): void {
    this.job = { ...this.job, ...fields, updatedAt: now };
    this.persist(() => this.deps.store.updateJob(this.job));
  }

  stop(reason: string, state: 'stopped' | 'done' | 'failed' = 'stopped'): void {
    if (this.ended) throw new ProtocolError('conflict', `job ${this.job.id} has already ended (${this.job.state})`);
    if (this.round) this.abortRound(reason, [], 'job_ended');
    this.barrier.cancel();
    this.checkpoints.dropPendingUpload();
    this.updateJob({ state, endReason: reason });
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


  handle<E extends VolunteerEventName>(volunteerId: string, event: E, payload: VolunteerEventParsed<E>): object {
    const m = this.members.get(volunteerId);
    if (!m) throw new ProtocolError('not_member', `not a member of job ${this.job.id}`);
    switch (event) {
      case 'model:loaded': return this.loads.loaded(m, payload as VolunteerEventParsed<'model:loaded'>);
      case 'round:ready': return this.onReady(m, payload as VolunteerEventParsed<'round:ready'>);
      case 'round:result': return this.onResult(m, payload as VolunteerEventParsed<'round:result'>);
      case 'round:failed': return this.onFailed(m, payload as VolunteerEventParsed<'round:failed'>);
      case 'round:validation': return this.checked.onValidation(m, this.currentRound(m, (payload as { roundId: number }).roundId), payload as VolunteerEventParsed<'round:validation'>);
      case 'replica:upload': return this.replication.onUpload(m.volunteerId, payload as VolunteerEventParsed<'replica:upload'>, flatLengthOf(this.job.spec));
      case 'evidence:upload': return this.checked.onEvidence(m, this.currentRound(m, (payload as { roundId: number }).roundId), payload as VolunteerEventParsed<'evidence:upload'>);
      case 'signal': return this.links.signal(m.volunteerId, payload as VolunteerEventParsed<'signal'>, () => this.currentRound(m, (payload as { roundId: number }).roundId));
      case 'peers:rtt': return this.links.probeReport(m.volunteerId, payload as VolunteerEventParsed<'peers:rtt'>);
      case 'links:paths': return this.links.reportPaths(m.volunteerId, payload as VolunteerEventParsed<'links:paths'>);
      case 'star:update': return starUpdate(this.currentRound(m, (payload as { roundId: number }).roundId), m.volunteerId, (payload as VolunteerEventParsed<'star:update'>).data, this.job, this.deps);
      case 'checkpoint:upload': return this.checkpoints.onUpload(m, payload as VolunteerEventParsed<'checkpoint:upload'>);
      case 'metrics': return this.checkpoints.onMetrics(m, payload as VolunteerEventParsed<'metrics'>);
      default: throw new ProtocolError('unknown_event', `${event} is not a job event`);
    }
  }

  /** Heartbeat status. A loading member whose download count grew gets more time (model-loads.ts); the count is kept at the highest seen. */
  status(volunteerId: string, status: Member['status']): void {
    const m = this.members.get(volunteerId);
    if (!m) return;
    const seen = m.status.downloadedBytes ?? 0, reported = status.downloadedBytes ?? 0;
    m.status = reported >= seen ? status : { ...status, downloadedBytes: seen };
    if (m.phase === 'loading' && reported > seen) this.loads.progressed(m);
    this.contributors.reported(m.identity, volunteerId, status);
    this.changedWorkers();
  }

  private onReady(m: Member, e: VolunteerEventParsed<'round:ready'>): object {
    if (m.phase === 'loading') throw new ProtocolError('conflict', 'not admitted yet: load the global model first');
    if (m.stale) {
      // Syncs went on without it: its work is dropped (said first, as an event: the runtime asks no ack), and it loads the job's model as a joiner would.
      this.deps.log(`job ${this.job.id}: ${m.volunteerId} is ready with work for sync ${e.seq}, but the job is at sync ${this.job.seq}: it reloads`);
      this.deps.toVolunteer(m.volunteerId, 'work:dropped', { jobId: this.job.id, seq: e.seq });
      this.loads.reload(m);
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
    // The barrier's pace is how far members run past their budgets (all their work when they have none): budgets change from sync to sync, overruns much less.
    this.deadlines.record('overrun', Math.max(0, m.workMs - m.workBudgetMs));
    this.tryBegin();
    return { waiting: this.round === null };
  }

  private currentRound(m: Member, roundId: number): ActiveRound {
    return roundOf(this.round, m.volunteerId, roundId);
  }

  private onResult(m: Member, e: VolunteerEventParsed<'round:result'>): object {
    const r = this.currentRound(m, e.roundId);
    if (r.mode === 'star' && !r.starSent) throw new ProtocolError('conflict', 'the star result has not been sent yet');
    if (r.results.has(m.volunteerId)) return { duplicate: true };
    if (r.mode === 'group') {
      const misfit = e.group ? reportFits(membersWith(r, m.volunteerId), e.group) : 'a group round\'s result carries its group report';
      if (misfit) throw new ProtocolError('bad_request', misfit);
    }
    if (e.rttMs && this.job.spec.regionalGroups) this.links.roundTrips(r, m.volunteerId, e.rttMs);
    // `e.step` is the member's own count: the job's step is the server's (r.step), whatever it says.
    this.planner.measured(m, r.steps?.[m.volunteerId], e.metrics.computeMs ?? e.metrics.wallMs);
    r.results.set(m.volunteerId, { checksum: e.checksum, metrics: e.metrics, group: r.mode === 'group' ? e.group : undefined });
    if (r.groups) {
      const g = r.groups.groupOf(m.volunteerId)!;
      if (!r.groups.groups[g].every((id) => r.results.has(id))) this.settleIfAnswered(r, m.volunteerId);
      else if (r.mode === 'group') this.checked.resultsIn(r, g);
      else this.commits.commitGroup(r, g);
    } else if (r.results.size === r.members.length) {
      if (r.mode === 'group') this.checked.checks.resultsIn(r);
      else this.commits.commit(r);
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
    const group = membersWith(r, member);
    if (!group.every((id) => r.failures.has(id) || r.results.has(id)) || !group.some((id) => r.failures.has(id))) return;
    const failed = group.filter((id) => r.failures.has(id));
    const why = `failed: ${failed.map((id) => `${id} ${r.failures.get(id)}`).join('; ')}`;
    if (r.groups) return this.commits.failGroup(r, r.groups.groupOf(member)!, why, []);
    const unreachable = unreachableClaims(r, failed);
    if (unreachable.refuted.length) this.deps.count('unreachable_claims_refuted');
    this.path.peerRoundFailed(unreachable.corroborated);
    this.abortRound(why, unreachable.refuted, 'member_failed');
    for (const id of unreachable.refuted) this.evict(id, `round ${r.roundId}: claimed it could not reach its peers, but every other member finished the exchange with it`);
    this.tryBegin();
  }

  private tryBegin(): void {
    if (this.ended || this.round || this.checkpoints.uploadPending || this.checkpoints.storingHoldsBegin || this.checkpoints.finalEvaluationHoldsBegin) return;
    this.resumeIfOrphaned();
    this.barrier.evictSilent();
    if (this.barrier.open()) this.begin(this.admission.ringOf([...this.members.inPhase.ready].sort((a, b) => a.shard - b.shard)));
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
      this.updateJob({ seq, step: this.checkpoints.latest?.step ?? 0 });
    }
    for (const m of [...this.members.unsentLoads]) this.loads.send(m, seq);
  }

  private begin(ready: Member[]): void {
    const now = this.deps.clock.now();
    const groupSize = this.job.spec.groupSize;
    // Untrusted Moshpit syncs: groups drawn at random (checked-groups.ts); members whose network would hold over half of a group wait.
    const drawn = groupSize !== undefined && this.job.spec.trust === 'untrusted' ? this.checked.draw(ready.map((m) => m.volunteerId), groupSize) : null;
    const ring = drawn ? ready.filter((m) => !drawn.leftOut.includes(m.volunteerId)) : ready;
    const seq = this.job.seq + 1;
    // Every member took the steps the server gave it since the last sync (H, or paced: the mean of
    // theirs; ddp: one optimizer step whatever its micro-batches): that is the count, not their word.
    const steps = this.planner.paced ? Object.fromEntries(ring.map((m) => [m.volunteerId, m.steps])) : null;
    const paced = steps && this.job.spec.strategy !== 'ddp';
    const step = this.job.step + (paced ? Math.round(ring.reduce((a, m) => a + m.steps, 0) / ring.length) : this.job.spec.H);
    const layout = drawn ? { drawn: drawn.groups } : {
      householdOf: this.job.spec.hierarchical ? (id: string) => this.members.get(id)?.address : undefined,
      localityOf: this.job.spec.regionalGroups ? this.links.localityOf(ring.map((m) => m.volunteerId), Math.ceil((groupSize ?? 2) / 2)) : undefined,
    };
    const grouped = groupSize !== undefined ? new GroupedSync(ring.map((m) => m.volunteerId), seq, groupSize, this.job.spec.seed, this.nextRoundId, layout) : null;
    // Moshpit groups average parameters (checked group rounds in untrusted jobs), with no star path: a failing group fails alone.
    const mode: RoundBegin['mode'] = grouped ? (drawn ? 'group' : 'ring') : this.path.useStar ? 'star' : this.job.spec.trust === 'untrusted' ? 'group' : 'ring';
    const dtype = mode === 'ring' ? this.planner.ringDtype : undefined;
    // Moshpit joiners load whatever checkpoint they were sent (an older model is fine); others need this sync's.
    const joinersWaiting = (grouped ? this.members.unsentLoads : this.members.inPhase.loading).size > 0;
    // Moshpit: the evaluators share the uploader's group, so they vouch for the model it uploads.
    const seats = this.checkpoints.seatsFor(ring, seq, step, joinersWaiting, grouped && ((a, b) => grouped.groupOf(a) === grouped.groupOf(b)));
    const homes = mode === 'ring' && !grouped && homeRingsApply(this.job.spec, !!this.deps.networkRules) ? homesOf(ring) : null; // by address, home-rings.ts
    const members = homes ? homes.flat() : ring.map((m) => m.volunteerId);
    const roundId = grouped?.lastRoundId ?? this.nextRoundId;
    this.nextRoundId = roundId + 1;
    const timeoutMs = this.deadlines.bound('round', this.deps.timing.roundTimeoutMs);
    const deadline = now + timeoutMs;
    this.round = {
      roundId, seq, mode, members, homes, ...seats, step,
      startedAt: now, results: new Map(), failures: new Map(), starUpdates: new Map(), starSent: false, removeAtCommit: [], validation: null, disputes: null, steps, dtype, groups: grouped,
      cancelDeadline: this.deps.clock.after(timeoutMs, () => this.deadlinePassed(roundId)),
    };
    if (this.job.state === 'waiting') this.job = { ...this.job, state: 'running', updatedAt: now };
    for (const m of ring) m.status.state = 'syncing';
    this.records.save(this.round, 'running', '');
    const common = { jobId: this.job.id, seq, mode, began: now, deadline, uploader: this.round.uploader, ...evaluatorsAsked(this.round) };
    if (grouped) {
      // Paced: each group weighs its members' parameters by the steps they took (the weights of its own mean only).
      grouped.announce(common, steps, (to, event, payload) => this.deps.toVolunteer(to, event, payload));
    } else {
      this.deps.toVolunteer(members, 'round:begin', { ...common, roundId, members, quorum: members.length, ...(steps ? { steps } : {}), ...(dtype ? { dtype } : {}), ...(homes ? { homes } : {}) });
    }
    this.deps.count('rounds_begun', { mode });
  }

  private deadlinePassed(roundId: number): void {
    const r = this.round;
    if (!r || r.roundId !== roundId) return;
    const silent = r.members.filter((id) => !r.failures.has(id) && this.owes(r, id) && (!r.groups || r.groups.state[r.groups.groupOf(id)!] === 'running'));
    if (r.groups) {
      // Only the groups still running fail; their silent members are evicted.
      for (const g of r.groups.running()) this.commits.failGroup(r, g, `deadline passed; silent: ${r.groups.groups[g].filter((id) => silent.includes(id)).join(', ') || 'none'}`, silent);
      for (const id of silent) this.evict(id, `missed the deadline of round ${r.groups.roundIdOf(r.groups.groupOf(id)!)}`);
      this.tryBegin();
      return;
    }
    if (r.mode !== 'star') this.path.peerRoundFailed();
    this.abortRound(`deadline passed; silent: ${silent.join(', ') || 'none'}`, silent, 'deadline');
    for (const id of silent) this.evict(id, `missed the deadline of round ${roundId}`);
    this.tryBegin();
  }

  /** Aborts the round (nothing is applied), removes the members it blames, and forms a new one without them. */
  private rejectRound(r: ActiveRound, liars: string[], why: string, fault = why): void {
    this.abortRound(why, liars, 'rejected');
    for (const id of liars) this.evict(id, `round ${r.roundId}: ${fault}`, 'integrity');
    this.tryBegin();
  }

  /** Whether the round still waits on `id`: its update or result, its validation, its evidence. */
  private owes(r: ActiveRound, id: string): boolean {
    if (r.mode === 'star' && !r.starSent) return !r.starUpdates.has(id);
    return !r.results.has(id) || GroupRoundChecks.owes(this.checked.viewOf(r, id), id);
  }

  private abortRound(reason: string, lost: string[], cause: AbortCause): void {
    const r = this.round;
    if (!r) return;
    r.cancelDeadline();
    this.round = null;
    // A Moshpit sync some of whose groups committed stays committed (the job's seq moved with them).
    const someCommitted = (r.groups?.committed().length ?? 0) > 0;
    if (someCommitted) this.records.save(r, 'committed', `${r.groups!.summary()}; the rest aborted: ${reason}`);
    else this.records.abort(r, reason, cause);
    if (r.groups) {
      for (const g of r.groups.running()) {
        const to = r.groups.groups[g].filter((id) => !lost.includes(id));
        this.deps.toVolunteer(to, 'round:abort', { jobId: this.job.id, roundId: r.groups.roundIdOf(g), reason, lost });
      }
    } else {
      this.deps.toVolunteer(r.members.filter((id) => !lost.includes(id)), 'round:abort', { jobId: this.job.id, roundId: r.roundId, reason, lost });
    }
    this.deps.count('rounds_aborted');
    this.deps.log(`job ${this.job.id}: round ${r.roundId} (sync ${r.seq}) aborted: ${reason}`);
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
