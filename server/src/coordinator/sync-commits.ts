// What a committed sync does to the job: the job's step and sync move on, the sync is recorded (its
// round, its metric point, a checksum disagreement), its members are credited and handed their next
// work (step-planner.ts), replicated units are scheduled (replication.ts), its evaluators and uploader
// are asked (checkpoints.ts), and members it left behind reload. A Moshpit sync commits group by group:
// each group goes back to training at once, and the sync is recorded when every group has settled.
import { targetStepsOf, type JobSummary, type RoundBegin } from '@tabfleet/protocol';
import type { Checkpoints, Fault } from './checkpoints';
import type { ContributorLedger } from './contributors';
import type { Deadlines } from './deadlines';
import type { JobTally } from './job-tally';
import type { JobHost, Member } from './members';
import { samplesPerStep } from './pacing';
import type { Replication } from './replication';
import type { RoundRecords } from './round-records';
import type { ActiveRound } from './round';
import type { StepPlanner } from './step-planner';
import { checksumsOf, syncPoint } from './sync-point';

export interface CommitHost extends JobHost {
  readonly deadlines: Deadlines;
  readonly planner: StepPlanner;
  readonly checkpoints: Checkpoints;
  readonly replication: Replication;
  readonly contributors: ContributorLedger;
  /** The job is at sync `seq` and step `step` now (stored); ring failures start over. */
  /** The job reached sync `seq` through a round of `mode` (ring for a Moshpit sync's groups). */
  advance(seq: number, step: number, now: number, mode: RoundBegin['mode']): void;
  /** The round is over (its deadline stops): the next may begin. */
  roundOver(r: ActiveRound): void;
  /** Every group of a Moshpit sync failed: counted as a failed ring sync. */
  ringFailed(): void;
  readonly tally: JobTally;
  readonly records: RoundRecords;
  persist(write: () => Promise<void> | void): void;
  evict(volunteerId: string, why: string, fault?: Fault): void;
  reload(m: Member): void;
  stop(reason: string, state: 'done'): void;
  tryBegin(): void;
  changedWorkers(): void;
  summary(): JobSummary;
}

export class SyncCommits {
  constructor(private readonly host: CommitHost) {}

  commit(r: ActiveRound): void {
    this.host.roundOver(r);
    const now = this.host.deps.clock.now();
    const results = [...r.results.values()];
    const step = r.step;
    this.host.deadlines.record('round', now - r.startedAt);
    if (r.mode === 'ring') this.host.planner.exchangeMeasured(r.dtype ?? 'f32', now - r.startedAt);
    this.host.advance(r.seq, step, now, r.mode);
    const checksums = checksumsOf(results);
    if (checksums.length > 1) {
      this.host.deps.count('checksum_mismatches');
      this.host.deps.log(`job ${this.host.job.id}: members disagree after sync ${r.seq}: ${checksums.join(', ')}`);
    }
    this.host.records.save(r, 'committed', checksums.length === 1 ? checksums[0] : `checksum mismatch: ${checksums.join(',')}`);
    const point = syncPoint(r.seq, step, now, results, r.members.length);
    this.host.tally.exchanged(results);
    this.host.persist(() => this.host.deps.store.addMetric(this.host.job.id, point));
    this.backToWork(r, r.members, r.roundId, now, true);
    // The next sync's steps, from the paces measured in this one (auto: and its H and precision).
    const next = this.host.planner.nextWork(r.members);
    this.host.planner.predictNext(r.members, now);
    // Members left out of this sync hold work for the model before it: dropped (see docs/protocol.md).
    const leftOut = [...this.host.members.values()].filter((m) => !r.members.includes(m.volunteerId) && m.phase !== 'loading');
    for (const m of leftOut) m.stale = true;
    // Before the commit, so a member given a unit trains it as the next sync's work.
    this.host.replication.schedule(r.seq, r.members, (id) => (this.host.planner.paced ? next.steps[id] : undefined));
    this.host.deps.toVolunteer(r.members, 'round:commit', { jobId: this.host.job.id, roundId: r.roundId, seq: r.seq, step, ...next.order });
    this.host.deps.count('rounds_committed', { mode: r.mode });
    this.host.deps.toDashboards(this.host.job.id, 'job:update', this.host.summary());
    this.host.deps.toDashboards(this.host.job.id, 'job:metrics', { jobId: this.host.job.id, points: [point] });
    for (const x of r.removeAtCommit) this.host.evict(x.member, x.reason, 'integrity');
    this.host.changedWorkers();
    for (const m of leftOut) if (m.phase === 'ready') this.host.reload(m);
    // Joiners told to load an older model now need this one.
    // Their load timer stops: they wait for the server now, and get a new one with the next model.
    for (const m of this.host.members.values()) {
      if (m.phase === 'loading' && m.loadSeq !== null && m.loadSeq < r.seq) {
        this.host.members.setLoadSeq(m, null);
        m.cancelLoadTimer?.();
        m.cancelLoadTimer = null;
      }
    }
    if (this.host.checkpoints.committed(r.seq, step, r.evaluators, r.uploader, r.measured).awaitingUpload) return;
    if (step >= targetStepsOf(this.host.job.spec)) this.host.stop(`reached ${step} steps`, 'done');
    else this.host.tryBegin();
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
      const m = this.host.members.get(id);
      if (!m) continue;
      const steps = r.steps?.[id] ?? this.host.job.spec.H;
      const samples = steps * samplesPerStep(this.host.job.spec), workMs = m.workMs;
      const credit = () => this.host.contributors.credit(m.identity, samples, workMs, now);
      if (replicated) this.host.replication.credit(id, r.seq, credit);
      else credit();
      this.host.members.setPhase(m, 'admitted');
      const group = r.groups ? { seq: r.seq, index: r.groups.groupOfRound(roundId)!, of: r.groups.groups.length } : null;
      Object.assign(m, { lastRound: roundId, lastRoundMs: now - r.startedAt, lastRoundMode: r.mode, group, workSince: now, workMs: 0, share: totalSteps ? steps / totalSteps : null });
    }
  }

  /**
   * A Moshpit group has every result: it commits at once and its members go back to training. The
   * first group to commit advances the job to the sync; the uploader's group opens the evaluation and
   * the checkpoint (they are of its model).
   */
  commitGroup(r: ActiveRound, g: number): void {
    const gs = r.groups!;
    gs.state[g] = 'committed';
    const now = this.host.deps.clock.now();
    const ids = gs.groups[g];
    const checksums = checksumsOf(ids.map((id) => r.results.get(id)!));
    if (checksums.length > 1) {
      this.host.deps.count('checksum_mismatches');
      this.host.deps.log(`job ${this.host.job.id}: members of group round ${gs.roundIdOf(g)} disagree after sync ${r.seq}: ${checksums.join(', ')}`);
    }
    gs.lastCommitAt = now;
    if (this.host.job.seq < r.seq) this.host.advance(r.seq, r.step, now, r.mode);
    this.backToWork(r, ids, gs.roundIdOf(g), now, false);
    // One budget for the whole sync: members that commit later must not plan by other paces.
    const next = this.host.planner.nextWork(ids, (gs.budgetMs ??= this.host.planner.stepBudget()));
    this.host.deps.toVolunteer(ids, 'round:commit', { jobId: this.host.job.id, roundId: gs.roundIdOf(g), seq: r.seq, step: r.step, ...next.order });
    this.host.deps.count('groups_committed');
    this.host.checkpoints.committed(r.seq, r.step, r.evaluators.filter((id) => ids.includes(id)), r.uploader && ids.includes(r.uploader) ? r.uploader : null, r.measured);
    this.host.changedWorkers();
    if (gs.settled()) this.finishGroupedSync(r);
  }

  /** A Moshpit group cannot finish: it alone is aborted, and its members keep their work for the next sync. */
  failGroup(r: ActiveRound, g: number, reason: string, lost: string[]): void {
    const gs = r.groups!;
    gs.state[g] = 'failed';
    this.host.deps.toVolunteer(gs.groups[g].filter((id) => !lost.includes(id) && this.host.members.has(id)), 'round:abort', { jobId: this.host.job.id, roundId: gs.roundIdOf(g), reason, lost });
    this.host.deps.count('groups_failed');
    this.host.deps.log(`job ${this.host.job.id}: group round ${gs.roundIdOf(g)} of sync ${r.seq} failed: ${reason}`);
    if (gs.settled()) this.finishGroupedSync(r);
  }

  /** Every group of a Moshpit sync has settled: the sync is recorded, and the next one may begin. */
  private finishGroupedSync(r: ActiveRound): void {
    const gs = r.groups!;
    this.host.roundOver(r);
    const committed = gs.committed();
    if (!committed.length) {
      this.host.ringFailed();
      this.host.records.abort(r, `every group failed (${gs.groups.length})`, 'groups_failed');
      this.host.deps.count('rounds_aborted');
      this.host.tryBegin();
      return;
    }
    const now = this.host.deps.clock.now();
    // The sync's exchange: its slowest group (the next deadline and a paced budget follow it).
    this.host.deadlines.record('round', gs.lastCommitAt! - r.startedAt);
    this.host.records.save(r, 'committed', gs.summary());
    const results = committed.flatMap((id) => r.results.get(id) ?? []);
    const point = syncPoint(r.seq, r.step, now, results, committed.length);
    this.host.tally.exchanged(results);
    this.host.persist(() => this.host.deps.store.addMetric(this.host.job.id, point));
    this.host.deps.count('rounds_committed', { mode: 'grouped' });
    this.host.deps.toDashboards(this.host.job.id, 'job:update', this.host.summary());
    this.host.deps.toDashboards(this.host.job.id, 'job:metrics', { jobId: this.host.job.id, points: [point] });
    // A checkpoint this sync was to give, whose group failed, is owed by the next.
    if (r.uploader && !committed.includes(r.uploader)) this.host.checkpoints.owed = true;
    // Joiners loading an older model go on loading it: a Moshpit member's model may be a sync old.
    if (!this.host.checkpoints.uploadPending && r.step >= targetStepsOf(this.host.job.spec)) this.host.stop(`reached ${r.step} steps`, 'done');
    else this.host.tryBegin();
  }
}
