// A job's checkpoints and evaluations: which members evaluate and upload a sync, the evaluators'
// reports combined (evaluations.ts), an upload kept until the evaluators agree on the model's checksum
// and stored only if it matches, a lost checkpoint owed by the next sync, and a target accuracy that
// ends the job only when members with standing vouch for it. The round clock calls in after commits
// and when members leave; this module calls back through its narrow host.
import { ProtocolError, maxCheckpointBytes, targetStepsOf, verifyCheckpoint, type CheckpointInfo, type MetricPoint, type VolunteerEventParsed } from '@tabfleet/protocol';
import { createHash } from 'node:crypto';
import { rmSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import type { JobRecord } from '../store/store';
import type { Deadlines } from './deadlines';
import type { JobTally } from './job-tally';
import { combineEvaluations, majorityChecksum, type EvaluationReport } from './evaluations';
import type { JobHost, Member } from './members';
import type { FaultKind } from './penalties';
import { shuffled } from './shuffle';
import { seatsFrom } from './standing';

/** A fault of timing (missed a deadline) or of what it sent (a wrong checkpoint, digest or evaluation). */
export type Fault = Exclude<FaultKind, 'departure'>;

/** A checkpoint for the just-committed sync that the uploader still owes, or that waits to be verified. */
interface PendingUpload {
  seq: number;
  uploader: string;
  since: number;
  /** Arrived and is the job's model; stored once it matches the evaluators' agreed checksum. */
  received: ReceivedCheckpoint | null;
  /** Its HTTP upload under way (checkpoint-uploads.ts), or null. */
  transfer: string | null;
  /** When its HTTP upload must be in, bytes coming or not (openTransfer); null before it asks for one. */
  transferDeadline: number | null;
  cancelTimer: () => void;
}

/**
 * The slowest an HTTP checkpoint upload may average, from the URL handed out to its last byte: a
 * 256 kbit/s uplink. The deadline otherwise runs from the last bytes written; without this floor an
 * uploader that sent a byte inside each bound held the job for ever (no round begins while an upload
 * is owed).
 */
export const MIN_UPLOAD_BYTES_PER_S = 32 * 1024;

/** A checkpoint that arrived: its bytes (a Socket.IO attachment) or the file an HTTP upload wrote. */
interface ReceivedCheckpoint {
  source: Uint8Array | string;
  bytes: number;
  sha256: string;
  checksum: string;
}

/** A sync's model being evaluated by several members. */
interface OpenEvaluation {
  seq: number;
  step: number;
  /** How many were asked (the majority is of this number, so silence cannot shrink it). */
  asked: number;
  since: number;
  evaluators: Set<string>;
  /** False: a checkpoint off the evaluation schedule, whose evaluators report the model's checksum and no accuracy. */
  measured: boolean;
  reports: Map<string, EvaluationReport>;
  cancelTimer: () => void;
}

/** Members that evaluate an evaluated or checkpointed sync (fewer when the round has fewer). */
export const EVALUATORS = 3;
/** Attempts at writing a verified checkpoint to the store before the sync's checkpoint is re-asked. */
const STORE_ATTEMPTS = 3;

/** What the checkpoints need of the round clock. */
export interface CheckpointHost extends JobHost {
  readonly ended: boolean;
  readonly networkRulesApply: boolean;
  readonly deadlines: Deadlines;
  readonly tally: JobTally;
  hasStanding(identity: string): boolean;
  offences(identity: string): number;
  evict(volunteerId: string, why: string, fault?: Fault): void;
  tryBegin(): void;
  stop(reason: string, state: 'done' | 'failed'): void;
  persist(write: () => Promise<void> | void): void;
  sendLoad(m: Member, seq: number): void;
  /** The job's summary changed (dashboards are told), and with it these fields of its record (kept in the store: a restart and the job's end keep them). */
  changed(fields?: Pick<JobRecord, 'notice'>): void;
}

export class Checkpoints {
  /** The latest stored checkpoint. */
  latest: CheckpointInfo | null;
  latestAccuracy: number | null = null;
  /** The sync latestAccuracy is of: an evaluation that ends after a newer sync's (a slow evaluator) does not replace it. */
  private latestAccuracySeq = -1;
  /**
   * A measured sync reached the target accuracy: the job ends once its newest sync is stored and
   * measured at the target, so the model it leaves is one that reached it.
   */
  finishing = false;
  /** The sync seated last while finishing (checkpointed and measured): its evaluation decides. */
  private finalSeq: number | null = null;
  /** The newest measured sync whose evaluation reached the target on enough vouchers. */
  private reachedSeq = -1;
  /** The last checkpoint was lost (upload stalled, refused or not stored): the next sync is checkpointed. */
  owed = false;
  /**
   * A Moshpit joiner was sent a checkpoint older than the job's sync: the next sync is checkpointed.
   * (Joiners were sent the newest checkpoint at once, so none ever waited for one, and with
   * checkpointEvery far off every joiner loaded the same ever older model: sync 2's at sync 12.)
   */
  private staleLoadSent = false;
  private pending: PendingUpload | null = null;
  /** The sync whose verified checkpoint is being written to the store (null: none). */
  private storing: number | null = null;
  private readonly evaluations = new Map<number, OpenEvaluation>();
  /** Checksum of the parameters in each stored checkpoint (what a joiner that loads it must report). */
  private readonly checksums = new Map<number, string>();
  /** Closed evaluations of recent syncs: the agreed checksum, or null when the evaluators disagreed. */
  private readonly settled = new Map<number, string | null>();

  constructor(private readonly host: CheckpointHost, latest: CheckpointInfo | null) {
    this.latest = latest;
  }

  /** What a loaded job knew: its latest accuracy and the checksum of its latest checkpoint's model. */
  restore(latestAccuracy: number | null, checkpointBytes: Uint8Array | null): void {
    this.latestAccuracy = latestAccuracy;
    if (this.latest && checkpointBytes) this.checksums.set(this.latest.seq, verifyCheckpoint(this.host.job.spec, checkpointBytes).digest);
  }

  /** A joiner was sent the checkpoint of `seq` to load (only a Moshpit job's may be older than its sync). */
  loadSent(seq: number): void {
    if (this.host.job.spec.groupSize !== undefined && seq < this.host.job.seq) this.staleLoadSent = true;
  }

  /** The checksum a joiner that loads the checkpoint of `seq` must report (undefined: not known). */
  checksumOf(seq: number): string | undefined {
    return this.checksums.get(seq);
  }

  /** An upload is owed or waits to be verified: no round begins meanwhile. */
  get uploadPending(): boolean {
    return this.pending !== null;
  }

  /**
   * A verified checkpoint is being written to the store while joiners wait for a model, or it is the
   * job's last: the next sync waits for it, so joiners are sent the checkpoint of the sync the others hold. (Begun at once,
   * a sync that commits before the write ends makes that checkpoint stale; with a store slower than
   * the members' work, joiners were never sent a model: 76 syncs behind in a test. Moshpit joiners
   * load an older model and hold no sync.)
   */
  get storingHoldsBegin(): boolean {
    if (this.storing === null) return false;
    // The job's last checkpoint: the job ends when it is stored, so no sync may begin past the target
    // meanwhile (once the store wrote off the event loop, syncs began and the job never ended).
    if (this.storing === this.host.job.seq && (this.finishing || this.host.job.step >= targetStepsOf(this.host.job.spec))) return true;
    return this.host.members.unsentLoads.size > 0 && this.host.job.spec.groupSize === undefined;
  }

  /** While finishing, the last sync's measurement decides whether the job ends there: no sync begins past it meanwhile. */
  get finalEvaluationHoldsBegin(): boolean {
    return this.finishing && this.finalSeq === this.host.job.seq && !!this.evaluations.get(this.finalSeq)?.measured;
  }

  /**
   * Who evaluates and uploads sync `seq` (at `step`) of `ring` (in a Moshpit sync, members of the
   * uploader's group, `sameGroup`). Checkpointed: when joiners wait for it or were sent an older one,
   * at the job's end, when the last checkpoint was lost, and every checkpointEvery syncs. Evaluated on
   * the test set (`measured`) at the job's end and every evalEverySteps from evalFromStep on; a
   * checkpoint off that schedule has evaluators too, who report only the model's checksum (what its
   * upload is verified by): checkpoints every 10 syncs of H 1 read the test set ten times as often as
   * evalEverySteps 100 asked.
   * Seats are chosen at random, so no seat (the first joiner, shard 0) is always the one trusted;
   * members with no faults on record first; in untrusted jobs members with standing first, never two
   * seats from one network (one address was the evaluators' majority: it ended a job on a forged 0.99
   * and evicted the honest evaluator).
   */
  seatsFor(ring: Member[], seq: number, step: number, joinersWaiting: boolean, sameGroup: ((a: string, b: string) => boolean) | null) {
    const spec = this.host.job.spec;
    const last = step >= targetStepsOf(spec) || this.finishing;
    if (this.finishing) this.finalSeq = seq;
    const checkpoint = last || joinersWaiting || this.staleLoadSent || this.owed || seq % spec.checkpointEvery === 0;
    if (checkpoint) this.staleLoadSent = false;
    const scheduled = step >= (spec.evalFromStep ?? 0) && Math.floor(step / spec.evalEverySteps) > Math.floor(this.host.job.step / spec.evalEverySteps);
    const measured = last || scheduled;
    const evaluate = checkpoint || measured;
    const ranked = shuffled(ring).sort((a, b) => this.host.offences(a.identity) - this.host.offences(b.identity));
    const inGroup = sameGroup ? ranked.filter((m) => sameGroup(m.volunteerId, ranked[0].volunteerId)) : ranked;
    const seats = this.host.networkRulesApply ? seatsFrom(inGroup, EVALUATORS, (m) => m.network, (m) => this.host.hasStanding(m.identity)) : inGroup;
    return { uploader: checkpoint ? seats[0].volunteerId : null, evaluators: evaluate ? seats.slice(0, EVALUATORS).map((m) => m.volunteerId) : [], measured };
  }

  /** A sync (or a Moshpit group of it) committed: its evaluators evaluate it and its uploader uploads it. */
  committed(seq: number, step: number, evaluators: string[], uploader: string | null, measured: boolean): { awaitingUpload: boolean } {
    const asked = evaluators.filter((id) => this.host.members.has(id));
    if (asked.length) this.openEvaluation(seq, step, asked, measured);
    if (!uploader || !this.host.members.has(uploader)) return { awaitingUpload: false };
    this.awaitUpload(seq, uploader, asked.includes(uploader));
    return { awaitingUpload: true };
  }

  /** A member left: an upload it owed is lost (before its round is aborted). */
  uploaderLeft(volunteerId: string): void {
    if (this.pending?.uploader === volunteerId && !this.pending.received) this.loseCheckpoint(`its uploader ${volunteerId} left`);
  }

  /** A member left: its evaluations go on without it (after its round was aborted). */
  evaluatorLeft(volunteerId: string): void {
    for (const ev of [...this.evaluations.values()]) {
      if (ev.evaluators.delete(volunteerId)) this.evaluationProgress(ev);
    }
  }

  /** The job ended: evaluations still open are recorded with the reports in (the final sync's accuracy among them). */
  closeEvaluations(): void {
    for (const ev of [...this.evaluations.values()]) this.finishEvaluation(ev);
  }

  /** This node lets go of the job: timers stop. */
  release(): void {
    for (const ev of this.evaluations.values()) ev.cancelTimer();
    this.dropPendingUpload();
  }

  /**
   * The uploader's checkpoint: refused (and the uploader evicted) unless it is the job's model; kept
   * until the sync's evaluators agree on the model's checksum, then stored only if it matches.
   */
  onUpload(m: Member, e: VolunteerEventParsed<'checkpoint:upload'>): object {
    const p = this.pending;
    if (!p || p.uploader !== m.volunteerId || p.seq !== e.seq || p.received) throw new ProtocolError('conflict', `no checkpoint of sync ${e.seq} was asked of this member`);
    if (e.data === undefined) return this.openTransfer(p, e.bytes!);
    this.received(p, e.data.slice(), e.data);
    return { bytes: e.data.byteLength };
  }

  /**
   * The uploader sends its checkpoint over HTTP: it is handed a URL and a token for an upload of
   * `bytes` (over what the job's checkpoint can take: refused, nothing else changes). Asked again, the
   * earlier upload is given up and a fresh one begun. Its deadline runs from the last bytes written, so
   * a large model on a slow link (or a chunk read by a busy server) is not cut off while its bytes keep coming;
   * the whole upload has the bound plus its bytes at MIN_UPLOAD_BYTES_PER_S from the first URL (asking
   * again does not move that).
   */
  private openTransfer(p: PendingUpload, bytes: number): object {
    const uploads = this.host.deps.checkpointUploads;
    if (!uploads) throw new ProtocolError('bad_request', 'this server takes checkpoints only as data (a Socket.IO attachment)');
    const transfer = uploads.begin(this.host.job.id, p.seq, bytes, maxCheckpointBytes(this.host.job.spec), {
      complete: (file) => this.transferred(p, file),
      progressed: () => this.pending === p && !p.received && this.restartUploadTimer(p),
    });
    if (p.transfer) uploads.cancel(p.transfer);
    p.transfer = transfer.id;
    // Later than the timer now running (the bound plus its bytes' time): the restarts bytes bring are held to it.
    p.transferDeadline ??= this.host.deps.clock.now() + this.uploadTimeoutMs() + Math.ceil((bytes / MIN_UPLOAD_BYTES_PER_S) * 1000);
    return { url: transfer.url, token: transfer.token, bytes };
  }

  /**
   * Every byte of an HTTP upload is in: `file` is now this module's, checked like an attachment. Read
   * on the thread pool, not the event loop (a model may be GiBs); the upload may be given up meanwhile.
   */
  private async transferred(p: PendingUpload, file: string): Promise<void> {
    const data = this.pending === p && !p.received ? await readFile(file).catch(() => null) : null;
    if (!data || this.pending !== p || p.received) {
      await rm(file, { force: true });
      throw new ProtocolError('conflict', `the checkpoint of sync ${p.seq} is no longer asked of this member`);
    }
    p.transfer = null;
    // Checked as a whole (safetensors is decoded in memory); it was received without being held.
    this.received(p, file, data);
  }

  /** A checkpoint arrived: refused (the uploader evicted) unless it is the job's model; else verified once the evaluators agree. */
  private received(p: PendingUpload, source: Uint8Array | string, data: Uint8Array): void {
    let checksum: string;
    try {
      checksum = verifyCheckpoint(this.host.job.spec, data).digest;
    } catch (err) {
      if (typeof source === 'string') rmSync(source, { force: true });
      this.uploaderFault(p, `sent a checkpoint that is not the job's model: ${(err as Error).message}`, 'integrity');
      throw err;
    }
    p.received = { source, bytes: data.byteLength, sha256: createHash('sha256').update(data).digest('hex'), checksum };
    this.settleUpload();
  }

  /** Stores the received upload once the sync's agreed checksum is known, or refuses it. */
  private settleUpload(): void {
    const p = this.pending;
    if (!p?.received) return;
    const agreed = this.agreedChecksum(p.seq);
    if (agreed === undefined) return; // the evaluators have not agreed yet
    if (agreed === null) {
      const why = `the evaluators of sync ${p.seq} did not agree on its model, so its checkpoint cannot be verified`;
      // At the job's end another uploader cannot help (what is missing is an agreed model, not an
      // upload): asking one after another kept a job whose evaluators disagreed running for ever.
      if (p.seq === this.host.job.seq && this.host.job.step >= targetStepsOf(this.host.job.spec) && !this.finishing) {
        this.host.deps.log(`job ${this.host.job.id}: no checkpoint of sync ${p.seq}: ${why}`);
        this.host.deps.count('checkpoints_lost');
        this.dropPendingUpload();
        this.host.stop(`reached ${this.host.job.step} steps; ${why} (the latest checkpoint is the last verified one)`, 'done');
        return;
      }
      this.loseCheckpoint(why);
      this.host.tryBegin();
      return;
    }
    if (p.received.checksum !== agreed) {
      this.uploaderFault(p, `uploaded a model with checksum ${p.received.checksum}; the evaluators of sync ${p.seq} agree on ${agreed}`, 'integrity');
      return;
    }
    const { source, checksum, bytes, sha256 } = p.received;
    p.cancelTimer();
    this.pending = null;
    this.host.deadlines.record('upload', this.host.deps.clock.now() - p.since);
    const info: CheckpointInfo = { seq: p.seq, step: this.host.job.step, bytes, sha256, createdAt: this.host.deps.clock.now() };
    this.storing = p.seq;
    this.storeCheckpoint(info, source, checksum, 1);
  }

  /** The agreed checksum of a sync's model: a string, null (they cannot agree), undefined (not yet known). */
  private agreedChecksum(seq: number): string | null | undefined {
    const ev = this.evaluations.get(seq);
    if (!ev) return this.settled.get(seq) ?? this.checksums.get(seq) ?? null;
    const majority = majorityChecksum(ev.reports, ev.asked);
    // Untrusted jobs: a majority of newcomers is known only once every evaluator spoke (weighStanding).
    if (majority && (!this.host.networkRulesApply || this.standingVouchers(ev, majority) >= 2)) return majority;
    if (this.host.networkRulesApply) return undefined;
    // Out of evaluators still to report, or too few left to make a majority: no agreement.
    const counts = new Map<string, number>();
    for (const r of ev.reports.values()) counts.set(r.checksum, (counts.get(r.checksum) ?? 0) + 1);
    const best = Math.max(0, ...counts.values());
    const outstanding = [...ev.evaluators].filter((id) => !ev.reports.has(id)).length;
    return (best + outstanding) * 2 > ev.asked ? undefined : null;
  }

  private storeCheckpoint(info: CheckpointInfo, source: Uint8Array | string, checksum: string, attempt: number): void {
    this.host.persist(async () => {
      try {
        const { store } = this.host.deps;
        await (typeof source === 'string' ? store.putCheckpointFile(this.host.job.id, info, source) : store.putCheckpoint(this.host.job.id, info, source));
      } catch (e) {
        this.host.deps.log(`job ${this.host.job.id}: storing the checkpoint of sync ${info.seq} failed (attempt ${attempt} of ${STORE_ATTEMPTS}): ${(e as Error).message}`);
        this.host.deps.count('checkpoint_store_failures');
        if (attempt < STORE_ATTEMPTS) this.host.deps.clock.after(1_000 * attempt, () => !this.host.ended && this.storeCheckpoint(info, source, checksum, attempt + 1));
        else {
          if (typeof source === 'string') rmSync(source, { force: true });
          this.checkpointLost(info.seq, `the store refused it ${STORE_ATTEMPTS} times: ${(e as Error).message}`);
        }
        return;
      }
      this.checksums.set(info.seq, checksum);
      // Joiners are only sent the latest checkpoints.
      for (const seq of this.checksums.keys()) if (this.checksums.size > 8) this.checksums.delete(seq);
      this.checkpointStored(info);
    });
  }

  /** A verified checkpoint could not be stored: the next sync is checkpointed; a job at its end fails. */
  private checkpointLost(seq: number, why: string): void {
    if (this.storing === seq) this.storing = null;
    if (this.host.ended) return;
    if (seq === this.host.job.seq && this.host.job.step >= targetStepsOf(this.host.job.spec)) {
      this.host.stop(`could not store the final checkpoint: ${why}`, 'failed');
      return;
    }
    this.owed = true;
    this.host.tryBegin();
  }

  /** The uploader sent something wrong: it is evicted and the next sync's checkpoint is asked of another member. */
  private uploaderFault(p: PendingUpload, why: string, fault: Fault): void {
    this.loseCheckpoint(why);
    this.host.evict(p.uploader, why, fault);
    this.host.tryBegin();
  }

  /**
   * Gives up on the pending upload. The next sync is checkpointed, by another member chosen at random;
   * after the last sync (members stop training there, so they still hold its model) another member
   * is asked for it at once.
   */
  loseCheckpoint(why: string): void {
    const p = this.pending;
    if (!p) return;
    this.host.deps.log(`job ${this.host.job.id}: no checkpoint of sync ${p.seq}: ${why}`);
    this.host.deps.count('checkpoints_lost');
    this.dropPendingUpload();
    this.owed = true;
    if (p.seq !== this.host.job.seq || this.host.job.step < targetStepsOf(this.host.job.spec)) return;
    const next = shuffled([...this.host.members.values()].filter((m) => m.phase !== 'loading' && m.volunteerId !== p.uploader))
      .sort((a, b) => this.host.offences(a.identity) - this.host.offences(b.identity))[0];
    if (!next) return;
    this.awaitUpload(p.seq, next.volunteerId, false);
    this.host.deps.toVolunteer(next.volunteerId, 'checkpoint:request', { jobId: this.host.job.id, seq: p.seq });
  }

  onMetrics(m: Member, e: VolunteerEventParsed<'metrics'>): object {
    const ev = this.evaluations.get(e.seq);
    if (!ev || !ev.evaluators.has(m.volunteerId)) throw new ProtocolError('not_member', `not an evaluator of sync ${e.seq} (or its evaluation is closed)`);
    if (ev.reports.has(m.volunteerId)) return { duplicate: true };
    // A checksum-only evaluation keeps no accuracy a member sends, and its quick reports do not
    // shorten the deadline of the evaluations that read the test set.
    ev.reports.set(m.volunteerId, { checksum: e.checksum, accuracy: ev.measured ? e.accuracy : null, loss: ev.measured ? e.loss : null });
    if (ev.measured) this.host.deadlines.record('evaluate', this.host.deps.clock.now() - ev.since);
    this.uploadAfterEvaluation(e.seq, m.volunteerId);
    this.evaluationProgress(ev);
    return {};
  }

  /** A report came in or an evaluator left: verify a waiting upload, and close the evaluation when all are in. */
  private evaluationProgress(ev: OpenEvaluation): void {
    if (this.pending?.seq === ev.seq) this.settleUpload();
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
    // Untrusted jobs: an accuracy its fellows dispute needs two evaluators with standing behind it.
    const believed = this.host.networkRulesApply ? (ids: readonly string[]) => ids.filter((id) => this.standing(id)).length >= 2 : undefined;
    const outcome = this.weighStanding(combineEvaluations(ev.reports, ev.asked, believed), ev);
    this.settled.set(ev.seq, outcome.agreed ? outcome.checksum : null);
    for (const seq of this.settled.keys()) if (seq < ev.seq - 4) this.settled.delete(seq);
    if (!outcome.agreed) {
      this.host.deps.count('evaluation_disagreements');
      this.host.deps.log(`job ${this.host.job.id}: evaluation of sync ${ev.seq} not recorded: ${outcome.reason}`);
      if (this.finishing && ev.seq === this.finalSeq) this.finalFellShort(ev.seq, null);
      if (this.pending?.seq === ev.seq) this.settleUpload();
      return;
    }
    for (const id of outcome.outvoted) if (!this.host.ended) this.host.evict(id, `evaluated a model (sync ${ev.seq}) other than the one its evaluators agree on`, 'integrity');
    if (outcome.accuracyDisputed) {
      this.host.deps.count('evaluation_accuracy_disputes');
      this.host.deps.log(`job ${this.host.job.id}: no accuracy of sync ${ev.seq}: ${outcome.accuracyDisputed}`);
    }
    if (outcome.accuracy !== null && ev.seq >= this.latestAccuracySeq) {
      this.latestAccuracy = outcome.accuracy;
      this.latestAccuracySeq = ev.seq;
    }
    if (this.pending?.seq === ev.seq) this.settleUpload();
    if (!ev.measured) {
      if (!this.host.ended) this.host.tryBegin();
      return;
    }
    const point: MetricPoint = {
      seq: ev.seq, step: ev.step, time: this.host.deps.clock.now(), loss: outcome.loss, accuracy: outcome.accuracy, samplesPerSec: null, bytesSent: null,
      workers: this.host.members.size, vouchers: outcome.vouchers,
    };
    this.host.persist(() => this.host.deps.store.addMetric(this.host.job.id, point));
    this.host.deps.toDashboards(this.host.job.id, 'job:metrics', { jobId: this.host.job.id, points: [point] });
    const target = this.host.job.spec.targetAccuracy;
    const vouchers = this.host.networkRulesApply ? this.standingVouchers(ev, outcome.checksum) : outcome.vouchers;
    const enough = vouchers >= Math.min(2, ev.asked);
    if (target !== undefined && outcome.accuracy !== null && outcome.accuracy >= target && !enough && !this.host.ended) {
      const notice = `sync ${ev.seq}: accuracy ${outcome.accuracy} reaches the target ${target}, but ${vouchers} of the ${outcome.vouchers} evaluators`
        + ' who vouch for it have standing (2 needed): training goes on';
      this.host.deps.count('targets_unvouched');
      this.host.deps.log(`job ${this.host.job.id}: ${notice}`);
      this.host.changed({ notice });
    }
    if (target !== undefined && outcome.accuracy !== null && outcome.accuracy >= target && enough) {
      this.reachedSeq = Math.max(this.reachedSeq, ev.seq);
      if (!this.finishing && !this.host.ended) {
        this.host.deps.log(`job ${this.host.job.id}: test accuracy ${outcome.accuracy} (${outcome.vouchers} members vouch) reached the target ${target}`);
        this.finishing = true;
      }
      this.finishIfReached();
    } else if (this.finishing && ev.seq === this.finalSeq) this.finalFellShort(ev.seq, outcome.accuracy);
    if (!this.host.ended) this.host.tryBegin();
  }

  /** Finishing: the job ends when its newest sync is stored and that model itself was measured at the target. */
  private finishIfReached(): void {
    const seq = this.host.job.seq;
    if (!this.finishing || this.host.ended || this.pending || this.latest?.seq !== seq || this.reachedSeq !== seq) return;
    if (this.host.job.notice) this.host.changed({ notice: undefined }); // what it held back on is settled
    this.host.stop(`reached target accuracy ${this.host.job.spec.targetAccuracy}`, 'done');
  }

  /**
   * The last sync's model, measured, is below the target an earlier sync reached (LocalSGD's models
   * wander a little between syncs): the job does not end on a model that misses its target. Training
   * goes on until a stored model is measured at the target (or the job's steps run out).
   */
  private finalFellShort(seq: number, accuracy: number | null): void {
    this.finishing = false;
    this.finalSeq = null;
    const measured = accuracy === null ? 'has no agreed accuracy' : `measured ${accuracy}`;
    const notice = `sync ${seq}: the model the job would end with ${measured}, below the target ${this.host.job.spec.targetAccuracy}: training goes on`;
    this.host.deps.count('targets_not_held');
    this.host.deps.log(`job ${this.host.job.id}: ${notice}`);
    this.host.changed({ notice });
  }

  /**
   * Untrusted jobs: evaluators without standing convict nobody and decide nothing alone. When the
   * reports disagree, a majority needs two members with standing behind it, else the sync's model is
   * not agreed (no checkpoint of it, no accuracy; the outvoted are not evicted).
   */
  private weighStanding(outcome: ReturnType<typeof combineEvaluations>, ev: OpenEvaluation): ReturnType<typeof combineEvaluations> {
    if (!this.host.networkRulesApply || !outcome.agreed || outcome.outvoted.length === 0) return outcome;
    const standing = this.standingVouchers(ev, outcome.checksum);
    if (standing >= 2) return outcome;
    this.host.deps.count('evaluations_unvouched');
    return { agreed: false, reason: `evaluators disagree (${outcome.outvoted.join(', ')} outvoted) and ${standing} of the majority have standing (2 needed): nobody is believed` };
  }

  /** Evaluators of `ev` with standing that reported the model `checksum`. */
  private standingVouchers(ev: OpenEvaluation, checksum: string): number {
    return [...ev.reports].filter(([id, r]) => r.checksum === checksum && this.standing(id)).length;
  }

  /** Whether a member (by volunteer id) is here and its identity has standing. */
  private standing(volunteerId: string): boolean {
    const m = this.host.members.get(volunteerId);
    return !!m && this.host.hasStanding(m.identity);
  }

  /** A checkpoint of `seq` is stored: joiners load it, and a finishing job ends. */
  private checkpointStored(info: CheckpointInfo): void {
    if (this.storing === info.seq) this.storing = null;
    this.host.tally.checkpointBytes += info.bytes;
    const seq = info.seq;
    if (seq === this.host.job.seq) this.owed = false;
    if (!this.latest || seq >= this.latest.seq) this.latest = info;
    this.host.changed();
    if (this.host.ended) return;
    this.finishIfReached();
    if (this.host.ended) return;
    if (seq === this.host.job.seq && this.host.job.step >= targetStepsOf(this.host.job.spec)) {
      this.host.stop(`reached ${this.host.job.step} steps`, 'done');
      return;
    }
    // Moshpit joiners take the newest checkpoint even when syncs went on while it was stored (model-loads.ts).
    const grouped = this.host.job.spec.groupSize !== undefined;
    if (seq === this.host.job.seq || (grouped && seq === this.latest.seq)) for (const m of [...this.host.members.unsentLoads]) this.host.sendLoad(m, seq);
    this.host.tryBegin();
  }

  /**
   * Waits for a sync's checkpoint from its uploader. An uploader that also evaluates the sync uploads
   * after its evaluation, so until it reports that, its deadline is the evaluation's plus the upload's;
   * its report restarts the clock (`uploadAfterEvaluation`). Timing the upload from the commit
   * instead evicted uploaders whose evaluation was slow under load.
   */
  private awaitUpload(seq: number, uploader: string, evaluatesFirst: boolean): void {
    const ms = this.uploadTimeoutMs() + (evaluatesFirst ? this.host.deadlines.bound('evaluate', this.host.deps.timing.loadTimeoutMs) : 0);
    const cancelTimer = this.host.deps.clock.after(ms, () => this.uploadTimedOut());
    this.pending = { seq, uploader, since: this.host.deps.clock.now(), received: null, transfer: null, transferDeadline: null, cancelTimer };
  }

  /** The uploader reported its evaluation: its upload is timed from now. */
  private uploadAfterEvaluation(seq: number, volunteerId: string): void {
    const p = this.pending;
    if (!p || p.seq !== seq || p.uploader !== volunteerId || p.received) return;
    p.since = this.host.deps.clock.now();
    this.restartUploadTimer(p);
  }

  /** The bound from now, or what is left of the HTTP upload's whole deadline if that comes first. */
  private restartUploadTimer(p: PendingUpload): void {
    p.cancelTimer();
    const left = p.transferDeadline === null ? Infinity : p.transferDeadline - this.host.deps.clock.now();
    const overall = left <= this.uploadTimeoutMs();
    p.cancelTimer = this.host.deps.clock.after(Math.max(0, Math.min(this.uploadTimeoutMs(), left)), () => this.uploadTimedOut(overall));
  }

  /** Bounded by the pace of earlier uploads; before any, by the configured maximum. */
  private uploadTimeoutMs(): number {
    return this.host.deadlines.bound('upload', this.host.deps.timing.loadTimeoutMs);
  }

  private uploadTimedOut(overall = false): void {
    const p = this.pending;
    if (!p) return;
    const slowest = `${MIN_UPLOAD_BYTES_PER_S / 1024} KiB/s over the whole upload`;
    // Arrived but not yet verifiable (the evaluators are late): not the uploader's fault.
    if (p.received) this.loseCheckpoint(`its evaluators did not agree on the model of sync ${p.seq} in time`);
    else this.uploaderFault(p, `did not upload the checkpoint of sync ${p.seq} in time${overall ? ` (slower than ${slowest})` : ''}`, 'liveness');
    this.host.tryBegin();
  }

  private openEvaluation(seq: number, step: number, evaluators: string[], measured: boolean): void {
    const ev: OpenEvaluation = {
      seq, step, asked: evaluators.length, since: this.host.deps.clock.now(), evaluators: new Set(evaluators), measured, reports: new Map(),
      cancelTimer: this.host.deps.clock.after(this.host.deadlines.bound('evaluate', this.host.deps.timing.loadTimeoutMs), () => {
        for (const id of ev.evaluators) if (!ev.reports.has(id)) this.host.evict(id, `did not report its evaluation of sync ${seq} in time`);
        if (this.evaluations.get(seq) === ev) this.finishEvaluation(ev);
      }),
    };
    this.evaluations.set(seq, ev);
  }

  /** Forgets the pending upload: its timer, an HTTP upload under way, a received file not stored. */
  dropPendingUpload(): void {
    const p = this.pending;
    if (!p) return;
    p.cancelTimer();
    if (p.transfer) this.host.deps.checkpointUploads?.cancel(p.transfer);
    if (typeof p.received?.source === 'string') rmSync(p.received.source, { force: true });
    this.pending = null;
  }
}
