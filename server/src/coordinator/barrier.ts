// The barrier before each sync: a round begins when every admitted member not left out is ready.
// Members still training are waited for up to a bound that follows their budgets and their usual
// overrun (deadlines.ts); past it they are left out of the sync (and reload after it), and past the
// configured barrier timeout evicted. Fewer than the job's minimum do not sync, unless joiners that
// wait for the checkpoint only this sync can leave would make up the minimum. Joiners loading the
// current model are waited for at the pace joiners usually load (one that missed a sync loading, once,
// longer: so a slow link does not chase newer models for ever; in untrusted jobs rarely for newcomers,
// whose identities cost nothing); Moshpit joiners take a later sync
// instead of holding one of thousands, and load the seed when the sync they would wait for cannot
// begin without them (model-loads.ts).
import type { Deadlines } from './deadlines';
import type { JobHost } from './members';
import type { StepPlanner } from './step-planner';

/** Moshpit jobs: a joiner admitted this long after the first member, once the first sync's barrier counts down, takes sync 2. */
const JOIN_GRACE_MS = 5_000;
/** Before any joiner was timed, the round waits this long for loading joiners once the others are ready. */
const FIRST_LOAD_GUESS_MS = 30_000;
/**
 * Untrusted jobs: a long hold for a joiner without standing starts at most once per this many load
 * timeouts, so fresh identities that never finish loading stall the job a tenth of its time at most.
 */
const NEWCOMER_LONG_HOLD_EVERY = 10;

export interface BarrierHost extends JobHost {
  readonly deadlines: Deadlines;
  readonly planner: StepPlanner;
  evict(volunteerId: string, why: string): void;
  tryBegin(): void;
  /** Whether an identity's work was confirmed enough (standing.ts): identities without it cost nothing. */
  hasStanding(identity: string): boolean;
  /** The coming sync lacks members (fewer than the minimum ready or training): joiners waiting for a model may be sent one. */
  quorumShort(): void;
}

export class Barrier {
  private cancelTimer: (() => void) | null = null;
  /** When the first member was admitted (to this coordinator): Moshpit joiners much later take sync 2. */
  private firstAdmittedAt: number | null = null;
  /** Below the minimum with members left out: fires at the first one's barrier timeout (awaitSilentEviction). */
  private cancelSilentEviction: (() => void) | null = null;
  /** Loading joiners are waited for until this fires; then the round goes on without them. */
  private cancelJoinerHold: (() => void) | null = null;
  private joinerHoldExpired = false;
  /** When a newcomer's long hold last began (untrusted jobs). */
  private newcomerLongHoldAt = -Infinity;

  constructor(private readonly host: BarrierHost) {}

  admitted(now: number): void {
    this.firstAdmittedAt ??= now;
  }

  /**
   * Whether the coming sync may begin now. If not, the timers it waits on run (the barrier's bound,
   * the joiners' hold), and they call tryBegin when they fire.
   */
  open(): boolean {
    const { job, deps, members, deadlines } = this.host;
    // Members left out of the coming sync are not waited for.
    const ready = members.inPhase.ready.size;
    const training = members.inPhase.admitted.size - members.leftOut.size;
    if (ready + training < job.spec.minWorkers) {
      this.host.quorumShort();
      // Joiners waiting for a checkpoint of the members' model (none exists) that would make up the
      // minimum: only this sync can leave one, so it begins without them (before, both waited for ever).
      const waiting = members.unsentLoads.size;
      if (ready + training === 0 || ready + training + waiting < job.spec.minWorkers) return this.awaitSilentEviction();
    }
    if (training > 0) {
      if (ready > 0 && !this.cancelTimer) {
        // Counted from the first ready member, or from the latest end of a budget still running
        // (and a step of the slowest member still in one).
        const now = deps.clock.now();
        const budgets = this.host.planner.runningBudgets();
        const cap = deps.timing.barrierTimeoutMs;
        const boundMs = Math.min(cap, Math.round(Math.max(now, budgets.endsAt ?? now) - now + budgets.longestStepMs) + deadlines.bound('overrun', cap));
        this.cancelTimer = deps.clock.after(boundMs, () => this.expired(boundMs));
      }
      return false;
    }
    // Joiners loading the current model are waited for, at the pace joiners usually load; after that
    // the round goes on without them and they load the next checkpoint. (Moshpit jobs do not wait once
    // a sync is due: joiners take a later sync.) A joiner that missed one sync that way is slower than
    // that pace (a thinner link), and would chase each newer model for ever, so the next sync waits
    // for it longer, once: see joinerHoldMs.
    if (members.inPhase.loading.size > members.unsentLoads.size && !this.joinerHoldExpired && !(job.spec.groupSize !== undefined && this.joinersJoinLater())) {
      const holdMs = this.joinerHoldMs();
      // Without a timer the hold ends when the joiner loads, or leaves (its load deadline evicts it): both call tryBegin.
      this.cancelJoinerHold ??= holdMs === Infinity ? () => {} : deps.clock.after(holdMs, () => {
        this.cancelJoinerHold = null;
        this.joinerHoldExpired = true;
        for (const m of this.loadsOut()) m.syncsMissedLoading++;
        this.host.tryBegin();
      });
      return false;
    }
    this.cancel();
    this.joinerHoldExpired = false;
    if (ready < job.spec.minWorkers) deps.log(`job ${job.id}: sync ${job.seq + 1} begins with ${ready} (minimum ${job.spec.minWorkers}): joiners wait for its checkpoint`);
    return true;
  }

  /** Loading members that were sent a model. */
  private loadsOut() {
    return [...this.host.members.inPhase.loading].filter((m) => m.loadSeq !== null);
  }

  /**
   * How long loading joiners hold the coming sync: the usual loads' bound; for the sync after one a
   * joiner missed loading, as long as its load is alive in a trusted job (its deadline follows the
   * bytes it reports coming in, model-loads.ts), and one load timeout in an untrusted job (identities
   * cost nothing there, and each fresh one of a joiner that trickles bytes would hold the job anew):
   * always for a joiner with standing, for one without at most once per NEWCOMER_LONG_HOLD_EVERY.
   */
  private joinerHoldMs(): number {
    const { deps, deadlines, job } = this.host;
    const missed = this.loadsOut().filter((m) => m.syncsMissedLoading === 1);
    if (missed.length && job.spec.trust === 'trusted') return Infinity;
    if (missed.some((m) => this.host.hasStanding(m.identity))) return deps.timing.loadTimeoutMs;
    const now = deps.clock.now();
    if (missed.length && now - this.newcomerLongHoldAt >= NEWCOMER_LONG_HOLD_EVERY * deps.timing.loadTimeoutMs) {
      this.newcomerLongHoldAt = now;
      return deps.timing.loadTimeoutMs;
    }
    return deadlines.bound('load', deps.timing.loadTimeoutMs, FIRST_LOAD_GUESS_MS);
  }

  /** Timers stop (the sync began, the job ended, or this node let go of it). */
  cancel(): void {
    this.cancelTimer?.();
    this.cancelTimer = null;
    this.cancelJoinerHold?.();
    this.cancelJoinerHold = null;
    this.cancelSilentEviction?.();
    this.cancelSilentEviction = null;
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
  joinersJoinLater(): boolean {
    const now = this.host.deps.clock.now();
    return this.host.job.seq > 0 || (this.cancelTimer !== null && now - (this.firstAdmittedAt ?? now) > JOIN_GRACE_MS);
  }

  /**
   * Below the minimum with members left out: nothing else may happen (the others wait ready), so a timer
   * evicts the first left-out member still silent at the barrier timeout. Without it such a member stayed
   * for ever and so did the job: three members, one whose round:ready the server had refused.
   */
  private awaitSilentEviction(): false {
    const { deps, members } = this.host;
    const since = Math.min(...[...members.leftOut].map((m) => m.workSince));
    if (this.cancelSilentEviction || since === Infinity) return false;
    const ms = Math.max(0, since + deps.timing.barrierTimeoutMs - deps.clock.now());
    this.cancelSilentEviction = deps.clock.after(ms, () => {
      this.cancelSilentEviction = null;
      this.host.tryBegin();
    });
    return false;
  }

  /** Members left out of rounds that have not reported for the configured barrier timeout are evicted. */
  evictSilent(): void {
    const now = this.host.deps.clock.now();
    for (const m of [...this.host.members.leftOut]) {
      if (now - m.workSince >= this.host.deps.timing.barrierTimeoutMs) this.host.evict(m.volunteerId, `not ready for ${Math.round((now - m.workSince) / 1000)} s`);
    }
  }

  /**
   * The others are ready and a member is not, past the pace-derived bound: the round goes on without
   * it (it stays a member, and reloads when it reports), unless it has been silent past the configured
   * barrier timeout, when it is evicted.
   */
  private expired(boundMs: number): void {
    this.cancelTimer = null;
    const { deps, members, job } = this.host;
    const now = deps.clock.now();
    for (const m of [...members.values()]) {
      if (m.phase !== 'admitted') continue;
      if (now - m.workSince >= deps.timing.barrierTimeoutMs) {
        this.host.evict(m.volunteerId, `not ready for ${Math.round((now - m.workSince) / 1000)} s`);
      } else if (m.leftOutSince === null) {
        members.setLeftOut(m, now);
        deps.count('members_left_out');
        const late = `not ready ${Math.round(now - m.workSince)} ms after it was handed work, ${boundMs} ms after the first member was`;
        deps.log(`job ${job.id}: ${m.volunteerId} is left out of sync ${job.seq + 1}: ${late}`);
      }
    }
    this.host.tryBegin();
  }
}
