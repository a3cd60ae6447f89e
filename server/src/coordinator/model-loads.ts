// Members loading the job's model: a joiner, or a member whose work went stale. Each is sent the
// model of the last sync when a checkpoint of it exists (the seed before the first), on a deadline
// at the pace loads usually take; what it reports loading is checked against the checkpoint's
// agreed checksum before it is admitted and handed its first work (step-planner.ts). Where every
// member holds that model (not Moshpit groups), a few of them are named too: the joiner may load it
// from them over WebRTC (checked against the same digest), and falls back to the checkpoint's URL.
import { ProtocolError, type VolunteerEventParsed } from '@tabfleet/protocol';
import type { Barrier } from './barrier';
import type { Checkpoints, Fault } from './checkpoints';
import type { Deadlines } from './deadlines';
import type { JobTally } from './job-tally';
import type { JobHost, Member } from './members';
import type { StepPlanner } from './step-planner';

export interface LoadsHost extends JobHost {
  readonly deadlines: Deadlines;
  readonly planner: StepPlanner;
  readonly checkpoints: Checkpoints;
  readonly barrier: Barrier;
  /** A round is under way (its commit would make the model a joiner loads stale). */
  readonly roundRunning: boolean;
  evict(volunteerId: string, why: string, fault?: Fault): void;
  tryBegin(): void;
  changedWorkers(): void;
  readonly tally: JobTally;
  /** Up to `count` of `holders` the joiner may link to and load from (peer-links.ts). */
  loadPeers(joiner: string, holders: string[], count: number): string[];
}

/** Members named to a joiner as the model's sources besides the server. */
export const LOAD_PEERS = 2;
/**
 * A load that keeps reporting progress is given at most this many load timeouts in all: 10 min at the
 * default 120 s, the lifetime of the checkpoint ticket it was sent (auth.ts), past which a resumed
 * download would be refused anyway.
 */
export const LOAD_PROGRESS_CEILING = 5;

export class ModelLoads {
  constructor(private readonly host: LoadsHost) {}

  /** Sends `m` the model of sync `seq` (a checkpoint's URL, or none for the seed), on a deadline. */
  send(m: Member, seq: number): void {
    const { job, deps } = this.host;
    this.host.members.setLoadSeq(m, seq);
    m.loadSince = deps.clock.now();
    this.loadDeadline(m, this.host.deadlines.bound('load', deps.timing.loadTimeoutMs));
    this.host.checkpoints.loadSent(seq);
    const url = seq === 0 && this.host.checkpoints.latest === null ? null : deps.checkpointUrl(job.id, seq);
    deps.toVolunteer(m.volunteerId, 'model:load', { jobId: job.id, seq, step: job.step, url, ...this.fromPeers(m, seq, url) });
  }

  /**
   * `m`'s heartbeat says more bytes came in for its load: a slow link, not a stuck tab. Its deadline is
   * the configured load timeout from now, never past LOAD_PROGRESS_CEILING of them after it was sent
   * (a tab that trickles bytes holds its seat that long at most; a sync it missed loading is followed by
   * one that waits for it, in a trusted job as long as this deadline lasts: barrier.ts).
   */
  progressed(m: Member): void {
    if (!m.cancelLoadTimer) return; // not loading on a deadline (waiting for a checkpoint to exist)
    const cap = this.host.deps.timing.loadTimeoutMs;
    const ms = Math.min(cap, m.loadSince + LOAD_PROGRESS_CEILING * cap - this.host.deps.clock.now());
    if (ms > 0) this.loadDeadline(m, ms);
  }

  /**
   * The server refused the loading member that holds shard `shard` its download for now (its address's
   * download slots are in use: routes.ts): it waits on the server, so its deadline moves as for bytes.
   */
  downloadRefused(shard: number): void {
    for (const m of this.host.members.inPhase.loading) if (m.shard === shard) return this.progressed(m);
  }

  private loadDeadline(m: Member, ms: number): void {
    m.cancelLoadTimer?.();
    m.cancelLoadTimer = this.host.deps.clock.after(ms, () => {
      this.host.evict(m.volunteerId, 'model load timed out');
      this.host.tryBegin();
    });
  }

  /**
   * The members `m` may ask for the model of sync `seq`, and its agreed digest: when that is the job's
   * model, which every member holds outside Moshpit groups (their groups' models differ).
   */
  private fromPeers(m: Member, seq: number, url: string | null): { peers?: string[]; digest?: string } {
    const digest = this.host.checkpoints.checksumOf(seq);
    if (url === null || !digest || seq !== this.host.job.seq || this.host.job.spec.groupSize !== undefined) return {};
    const holders = this.host.members.holders().filter((h) => !h.stale).map((h) => h.volunteerId);
    const peers = this.host.loadPeers(m.volunteerId, holders, LOAD_PEERS);
    return peers.length ? { peers, digest } : {};
  }

  /**
   * A joiner's model, if it can load one now: the seed (nothing committed yet) or a checkpoint of the
   * last sync, unless a round is under way (its commit would make that model stale before it is in).
   * A Moshpit joiner loads the latest checkpoint whatever its sync: its groups average an older model
   * in like any other, and waiting for a checkpoint of the current sync never ends when syncs commit
   * faster than checkpoints are stored.
   */
  sendIfReady(m: Member): void {
    const { job, checkpoints } = this.host;
    const latest = checkpoints.latest;
    if (job.spec.groupSize !== undefined && latest && job.seq > 0) return this.send(m, latest.seq);
    if (this.host.roundRunning) return;
    if (job.seq === 0 || latest?.seq === job.seq) this.send(m, job.seq);
  }

  /**
   * Moshpit joiners waiting for a checkpoint when none is stored yet, while the next sync cannot begin
   * without them (the others are fewer than the job's minimum): they load the seed. The groups average
   * an older model in like any other, and the checkpoint they waited for could only come from that sync.
   */
  seedWaitingJoiners(): void {
    const { job, checkpoints, members, deps } = this.host;
    if (job.spec.groupSize === undefined || checkpoints.latest || members.unsentLoads.size === 0) return;
    const joiners = [...members.unsentLoads];
    deps.log(`job ${job.id}: sync ${job.seq + 1} needs ${joiners.map((m) => m.volunteerId).join(', ')} and no checkpoint exists yet: they load the seed`);
    for (const m of joiners) this.send(m, 0);
  }

  /** A member whose work is stale goes back to loading: the job's model of the last sync, when a checkpoint of it exists. */
  reload(m: Member): void {
    this.host.members.setPhase(m, 'loading');
    this.host.members.setLoadSeq(m, null);
    m.stale = false;
    m.sitsOut = false;
    m.status.state = 'loading';
    const latest = this.host.checkpoints.latest;
    if (this.host.job.spec.groupSize !== undefined && latest) this.send(m, latest.seq);
    else if (!this.host.roundRunning && !this.host.checkpoints.uploadPending && latest?.seq === this.host.job.seq) this.send(m, this.host.job.seq);
    this.host.changedWorkers();
  }

  /** `m` reports the model it loaded: admitted with its first work, or sent a newer model, or evicted for the wrong one. */
  loaded(m: Member, e: VolunteerEventParsed<'model:loaded'>): object {
    const { job, deps, members } = this.host;
    if (m.phase !== 'loading' || m.loadSeq !== e.seq) throw new ProtocolError('stale_round', `was not asked to load the model of sync ${e.seq}`);
    const expected = this.host.checkpoints.checksumOf(e.seq);
    if (expected && e.checksum !== expected) {
      const why = `loaded a model with checksum ${e.checksum}; the checkpoint of sync ${e.seq} holds ${expected}`;
      this.host.evict(m.volunteerId, why, 'integrity');
      this.host.tryBegin();
      throw new ProtocolError('bad_tensor', why);
    }
    m.cancelLoadTimer?.();
    m.cancelLoadTimer = null;
    this.host.deadlines.record('load', deps.clock.now() - m.loadSince);
    this.host.tally.modelLoaded(e.from && e.from !== 'server' ? 'peer' : 'server');
    // A Moshpit member's model may be a sync old: the groups average it in like any other.
    const grouped = job.spec.groupSize !== undefined;
    if (e.seq !== job.seq && !grouped) {
      // A sync committed while it loaded; it needs the newer model.
      members.setLoadSeq(m, null);
      if (this.host.checkpoints.latest?.seq === job.seq && !this.host.roundRunning) this.send(m, job.seq);
      return { admitted: false };
    }
    members.setPhase(m, 'admitted');
    m.syncsMissedLoading = 0;
    m.workSince = deps.clock.now();
    m.workBudgetMs = 0;
    this.host.barrier.admitted(m.workSince);
    m.status.state = 'training';
    const work = this.host.planner.admitted(m);
    // A Moshpit joiner mid-job starts its work after the others started theirs: the coming sync does
    // not wait for it (it joins the one after, work kept), so joiners never stall a sync of thousands.
    if (grouped && this.host.barrier.joinersJoinLater()) members.setLeftOut(m, m.workSince);
    this.host.changedWorkers();
    this.host.tryBegin();
    return { admitted: true, ...work };
  }
}
