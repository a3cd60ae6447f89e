// What one job's coordinator has counted since this node took the job: its syncs by outcome (an abort
// by its cause), its evictions by fault, and the bytes its syncs and checkpoints moved. /metrics reads
// it at scrape time (metrics.ts), labelled by job_id, for as long as the job runs on this node.
import type { Fault } from './checkpoints';

/** Why a sync was aborted: a bounded set, so each is a label value (the round's detail says more). */
export const ABORT_CAUSES = ['deadline', 'member_lost', 'member_failed', 'rejected', 'groups_failed', 'job_ended', 'server_restarted'] as const;
export type AbortCause = (typeof ABORT_CAUSES)[number];

export const EVICTION_FAULTS: readonly Fault[] = ['liveness', 'integrity'];

export class JobTally {
  /** Syncs as the rounds API records them: a Moshpit sync some of whose groups committed is committed. */
  readonly rounds = { committed: 0, aborted: 0 };
  readonly aborts = new Map<AbortCause, number>(ABORT_CAUSES.map((c) => [c, 0]));
  readonly evictions = new Map<Fault, number>(EVICTION_FAULTS.map((f) => [f, 0]));
  /** What the members of committed syncs reported moving in those syncs (`round:result` metrics). */
  readonly exchangeBytes = { sent: 0, received: 0 };
  /** Checkpoints stored (their safetensors bytes). */
  checkpointBytes = 0;
  /** Models members loaded and the server admitted, by where they came from (the server, or a member over WebRTC). */
  readonly modelLoads = { server: 0, peer: 0 };

  /** A sync's record was written with its final outcome: committed, or aborted (and why). */
  roundEnded(outcome: 'committed'): void;
  roundEnded(outcome: 'aborted', cause: AbortCause): void;
  roundEnded(outcome: 'committed' | 'aborted', cause?: AbortCause): void {
    this.rounds[outcome]++;
    if (cause) this.aborts.set(cause, this.aborts.get(cause)! + 1);
  }

  modelLoaded(source: 'server' | 'peer'): void {
    this.modelLoads[source]++;
  }

  evicted(fault: Fault): void {
    this.evictions.set(fault, this.evictions.get(fault)! + 1);
  }

  exchanged(results: readonly { metrics: { bytesSent: number; bytesReceived: number } }[]): void {
    for (const r of results) {
      this.exchangeBytes.sent += r.metrics.bytesSent;
      this.exchangeBytes.received += r.metrics.bytesReceived;
    }
  }
}
