// Reputation by identity (the browser's client id), across every job: how much of a volunteer's work a
// check confirmed, and its faults. Read from the store when it joins a job, added to as checks pass
// and faults happen; the store adds rather than overwrites, so jobs on several nodes can count at once.
// A new identity, or one with a recent fault, is on probation (protocol's validation.ts): its parts are
// validated first and its work replicated more often.
import { onProbation, type WorkerRow } from '@tabfleet/protocol';
import type { ReputationChange, ReputationRecord } from '../store/store';

export class Reputations {
  private readonly known = new Map<string, ReputationRecord>();

  /** `save` queues a change for the store (the coordinator's ordered writes). */
  constructor(private readonly save: (clientId: string, change: ReputationChange) => void) {}

  /** What the store held for an identity when it joined (null: never seen). Kept if already known here. */
  know(identity: string, stored: ReputationRecord | null | undefined): void {
    if (this.known.has(identity)) return;
    this.known.set(identity, stored ? { ...stored } : { clientId: identity, verified: 0, verifiedSinceFault: 0, faults: 0, lastFault: null, lastFaultAt: null });
  }

  verified(identity: string): void {
    const r = this.record(identity);
    r.verified += 1;
    r.verifiedSinceFault += 1;
    this.save(identity, { verified: 1 });
  }

  fault(identity: string, reason: string, at: number): void {
    const r = this.record(identity);
    Object.assign(r, { faults: r.faults + 1, verifiedSinceFault: 0, lastFault: reason, lastFaultAt: at });
    this.save(identity, { fault: { reason, at } });
  }

  onProbation(identity: string): boolean {
    return onProbation(this.known.get(identity) ?? { verifiedSinceFault: 0 });
  }

  row(identity: string): WorkerRow['reputation'] {
    const r = this.known.get(identity);
    return r ? { verified: r.verified, faults: r.faults, probation: onProbation(r) } : null;
  }

  private record(identity: string): ReputationRecord {
    this.know(identity, null);
    return this.known.get(identity)!;
  }
}
