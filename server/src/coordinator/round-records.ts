// A sync's record in the store (GET /api/jobs/:id/rounds) as it begins and ends, and the same end in
// the job's tally for /metrics, so the two cannot count differently.
import type { RoundRecord } from '../store/store';
import type { AbortCause, JobTally } from './job-tally';
import type { ActiveRound } from './round';
import type { CoordinatorDeps } from './types';

export class RoundRecords {
  constructor(
    private readonly jobId: string,
    private readonly deps: CoordinatorDeps,
    private readonly persist: (write: () => Promise<void> | void) => void,
    private readonly tally: JobTally,
  ) {}

  /** Begun (`running`) or committed (with the checksum, or what the groups did). */
  save(r: ActiveRound, outcome: 'running' | 'committed', detail: string): void {
    if (outcome === 'committed') this.tally.roundEnded('committed');
    this.write(r, outcome, detail);
  }

  /** Aborted: nothing was applied; `detail` says why in words, `cause` as a label. */
  abort(r: ActiveRound, detail: string, cause: AbortCause): void {
    this.tally.roundEnded('aborted', cause);
    this.write(r, 'aborted', detail);
  }

  /** Rounds a stopped server left running, when their job is loaded again: aborted by the restart. */
  abortLeftRunning(rounds: readonly RoundRecord[]): void {
    for (const r of rounds.filter((x) => x.outcome === 'running')) {
      this.tally.roundEnded('aborted', 'server_restarted');
      this.persist(() => this.deps.store.saveRound({ ...r, outcome: 'aborted', endedAt: this.deps.clock.now(), detail: 'server restarted' }));
    }
  }

  private write(r: ActiveRound, outcome: RoundRecord['outcome'], detail: string): void {
    const record: RoundRecord = {
      jobId: this.jobId, roundId: r.roundId, seq: r.seq, mode: r.mode, members: r.members, outcome, startedAt: r.startedAt,
      endedAt: outcome === 'running' ? null : this.deps.clock.now(), detail,
    };
    this.persist(() => this.deps.store.saveRound(record));
  }
}
