// A job's members and the sets the round clock counts them by. Members go loading → admitted
// (holding the global model of the last committed sync and training locally) → ready (at the barrier
// for the next sync). The sets are kept beside the map so the barrier is counted, not scanned, on
// every event (a Moshpit job has up to 10,000 members); phases and left-outs change only here.
import type { WorkerRow } from '@tabfleet/protocol';
import type { JobRecord } from '../store/store';
import type { CoordinatorDeps, VolunteerInfo } from './types';

export type Phase = 'loading' | 'admitted' | 'ready';

export interface MemberStatus {
  state: string;
  hidden: boolean;
  step: number;
  samplesPerSec: number;
  bytesSent: number;
  bytesReceived: number;
  /** What it has downloaded for the job so far, as its last heartbeat said (model-loads.ts). */
  downloadedBytes?: number;
}

export interface Member extends VolunteerInfo {
  shard: number;
  phase: Phase;
  /** The sync whose model it was told to load (null: waiting for a checkpoint to exist). */
  loadSeq: number | null;
  loadSince: number;
  cancelLoadTimer: (() => void) | null;
  /** Syncs that began without it while it loaded (the barrier's joiner hold ran out): after one, the next waits for it longer (barrier.ts). */
  syncsMissedLoading: number;
  status: MemberStatus;
  lastRound: number | null;
  lastRoundMs: number | null;
  lastRoundMode: WorkerRow['lastRoundMode'];
  /** Moshpit jobs: its group at the last sync it committed with. */
  group: WorkerRow['group'];
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

/** What every module beside the round clock reads: the job as it is now (replaced on each change), the world around it, the members. */
export interface JobHost {
  readonly job: JobRecord;
  readonly deps: CoordinatorDeps;
  readonly members: MemberBook;
}

export class MemberBook {
  private readonly byId = new Map<string, Member>();
  readonly inPhase: Record<Phase, Set<Member>> = { loading: new Set(), admitted: new Set(), ready: new Set() };
  /** Admitted members left out of the coming sync. */
  readonly leftOut = new Set<Member>();
  /** Loading members not sent a model yet (loadSeq null): the rest of `inPhase.loading` have a load out. */
  readonly unsentLoads = new Set<Member>();
  /** Data shards of the members: a joiner takes the lowest free one. */
  private readonly shardsHeld = new Set<number>();

  get size(): number {
    return this.byId.size;
  }

  get(volunteerId: string): Member | undefined {
    return this.byId.get(volunteerId);
  }

  has(volunteerId: string): boolean {
    return this.byId.has(volunteerId);
  }

  values(): IterableIterator<Member> {
    return this.byId.values();
  }

  ids(): IterableIterator<string> {
    return this.byId.keys();
  }

  /** A new member, loading, on the lowest free shard. */
  add(v: VolunteerInfo, network: string, now: number, steps: number): Member {
    let shard = 0;
    while (this.shardsHeld.has(shard)) shard++;
    this.shardsHeld.add(shard);
    const member: Member = {
      ...v, network, shard, phase: 'loading', loadSeq: null, loadSince: now, cancelLoadTimer: null, syncsMissedLoading: 0, lastRound: null, lastRoundMs: null, lastRoundMode: null, group: null,
      status: { state: 'loading', hidden: false, step: 0, samplesPerSec: 0, bytesSent: 0, bytesReceived: 0 }, identity: v.clientId ?? v.volunteerId,
      workSince: now, workMs: 0, workBudgetMs: 0, leftOutSince: null, stale: false, sitsOut: false, msPerStep: null, steps, share: null,
    };
    this.byId.set(v.volunteerId, member);
    this.inPhase.loading.add(member);
    this.unsentLoads.add(member);
    return member;
  }

  remove(m: Member): void {
    m.cancelLoadTimer?.();
    this.byId.delete(m.volunteerId);
    this.inPhase[m.phase].delete(m);
    this.leftOut.delete(m);
    this.unsentLoads.delete(m);
    this.shardsHeld.delete(m.shard);
  }

  /** Everyone out at once (the job ended); returns who was in. */
  clear(): Member[] {
    const all = [...this.byId.values()];
    for (const m of all) m.cancelLoadTimer?.();
    this.byId.clear();
    for (const set of Object.values(this.inPhase)) set.clear();
    this.leftOut.clear();
    this.unsentLoads.clear();
    this.shardsHeld.clear();
    return all;
  }

  /** A member moves to `phase`; leaving 'admitted' ends its being left out. */
  setPhase(m: Member, phase: Phase): void {
    this.inPhase[m.phase].delete(m);
    m.phase = phase;
    this.inPhase[phase].add(m);
    if (phase === 'loading' && m.loadSeq === null) this.unsentLoads.add(m);
    else this.unsentLoads.delete(m);
    if (phase !== 'admitted') this.setLeftOut(m, null);
  }

  setLoadSeq(m: Member, seq: number | null): void {
    m.loadSeq = seq;
    if (seq === null && m.phase === 'loading') this.unsentLoads.add(m);
    else this.unsentLoads.delete(m);
  }

  setLeftOut(m: Member, since: number | null): void {
    m.leftOutSince = since;
    if (since === null) this.leftOut.delete(m);
    else this.leftOut.add(m);
  }

  /** Members holding the job's model (admitted or ready). */
  holders(): Member[] {
    return [...this.byId.values()].filter((m) => m.phase !== 'loading');
  }

  /** How many members connect from `address`, and from `network`. */
  countFrom(address: string | undefined, network: string): { address: number; network: number } {
    let fromAddress = 0, fromNetwork = 0;
    for (const m of this.byId.values()) {
      if (address && m.address === address) fromAddress++;
      if (m.network === network) fromNetwork++;
    }
    return { address: fromAddress, network: fromNetwork };
  }
}
