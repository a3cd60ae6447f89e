// Redundant recompute (protocol's replication.ts) at one job's coordinator. At a commit the server may
// give one member's next local work to a second member as a replayable unit: the original trains it
// as its own work, the replica recomputes it on a second model, both upload the delta, and the two are
// compared within the tolerance measured between honest adapters. Agreement confirms both (reputation);
// a disagreement goes to a third member, and the one that disagrees with both others loses reputation.
// One unit is open at a time. Members on probation are replicated often, everyone else rarely
// (BOINC's adaptive replication).
//
// Where the server tells networks apart (untrusted jobs, standing.ts), the replica comes from another
// network than the original, and a tie is broken only by a member with standing from a third network
// (two Sybils of one address won every tie against an honest member). An original or replica that
// does not upload within two syncs gets a fault, and its credit for the sync the unit was waits for
// its upload (it had full credit and no fault).
import { randomInt } from 'node:crypto';
import { ProtocolError, REPLICATION_RATE, compareReplicas, type JobSpec, type ReplicaComparison, type ReplicaTask, type ReplicaUnit, type VolunteerEventParsed } from '@tabfleet/protocol';
import type { CoordinatorDeps } from './types';

/** A unit still open this many syncs after its start is closed unresolved (a member left, or a tie-break came too late). */
const UNIT_LIFETIME_SYNCS = 3;

export interface ReplicationHost {
  readonly jobId: string;
  readonly spec: JobSpec;
  readonly deps: Pick<CoordinatorDeps, 'toVolunteer' | 'log' | 'count' | 'replicationRate'>;
  /** The members now, with their identity and shard. */
  members(): { volunteerId: string; identity: string; shard: number }[];
  onProbation(identity: string): boolean;
  verified(identity: string): void;
  fault(identity: string, reason: string): void;
  /** Where a member downloads shard `index` (with a ticket), when the server serves the dataset. */
  shardUrl(index: number): string | null;
  /** When networks count (untrusted jobs on a server that tells them apart): a member's network; else null. */
  networkOf(volunteerId: string): string | null;
  /** Whether checks confirmed enough of this identity's work (standing.ts). */
  hasStanding(identity: string): boolean;
}

interface OpenUnit {
  unit: ReplicaUnit;
  /** volunteerId → identity, in the order asked: the original first. */
  asked: Map<string, string>;
  deltas: Map<string, Float32Array>;
  tieBreak: boolean;
  /** The members that hold the unit's starting model (a tie-break is asked of one of them). */
  holders: readonly string[];
  /** Commit credit of the original and replica held until they upload (see `credit`). */
  deferred: Map<string, () => void>;
  /** Asked members already faulted for not uploading (once per unit). */
  missing: Set<string>;
}

/** Syncs after a unit's start by which its original and replica must have uploaded. */
const UPLOAD_WITHIN_SYNCS = 2;

export class Replication {
  private open: OpenUnit | null = null;

  constructor(private readonly host: ReplicationHost, private readonly rand: () => number = Math.random) {}

  /** Whether the job's strategy has replayable units (LocalSGD and DiLoCo; not DDP). */
  private get applies(): boolean {
    return this.host.spec.strategy !== 'ddp' && this.host.spec.trust === 'untrusted';
  }

  /**
   * At the commit of sync `seq` by `committed` (the round's members, who hold its model next): maybe
   * replicate one member's next unit, of the steps it was given for that work (`stepsOf`; else the
   * job's H), so a paced job's plan, cut to its target, holds. Call before sending `round:commit`.
   */
  schedule(seq: number, committed: readonly string[], stepsOf?: (volunteerId: string) => number | undefined): void {
    if (this.open && this.open.unit.seq + UPLOAD_WITHIN_SYNCS <= seq) this.faultMissingUploads(this.open);
    if (this.open && this.open.unit.seq + UNIT_LIFETIME_SYNCS <= seq) this.close(`unresolved: still open ${UNIT_LIFETIME_SYNCS} syncs later`);
    const members = this.host.members().filter((m) => committed.includes(m.volunteerId));
    if (!this.applies || this.open || members.length < 2) return;
    const probation = members.filter((m) => this.host.onProbation(m.identity));
    const rate = this.host.deps.replicationRate ?? REPLICATION_RATE;
    const pool = probation.length && this.rand() < rate.probation ? probation : this.rand() < rate.trusted ? members : [];
    if (pool.length === 0) return;
    const original = pool[Math.floor(this.rand() * pool.length)];
    // Where networks count, the replica is of another network than the original.
    const network = this.host.networkOf(original.volunteerId);
    const others = members.filter((m) => m !== original && (network === null || this.host.networkOf(m.volunteerId) !== network));
    if (others.length === 0) return;
    const trusted = others.filter((m) => !this.host.onProbation(m.identity));
    const replica = pickFrom(trusted.length ? trusted : others, this.rand);
    const unit: ReplicaUnit = {
      unitId: `unit-${seq}-${randomInt(1e9)}`, seq, shard: { index: original.shard, count: this.host.spec.maxWorkers },
      batchSeed: randomInt(2 ** 31), steps: stepsOf?.(original.volunteerId) ?? this.host.spec.H,
    };
    const asked = new Map([[original.volunteerId, original.identity], [replica.volunteerId, replica.identity]]);
    this.open = { unit, asked, deltas: new Map(), tieBreak: false, holders: committed, deferred: new Map(), missing: new Set() };
    this.send(original.volunteerId, 'original');
    this.send(replica.volunteerId, 'replica');
    this.host.deps.count('units_replicated');
  }

  onUpload(volunteerId: string, e: VolunteerEventParsed<'replica:upload'>, length: number): object {
    const o = this.open;
    if (!o || o.unit.unitId !== e.unitId) throw new ProtocolError('conflict', `unit ${e.unitId} is not open`);
    if (!o.asked.has(volunteerId)) throw new ProtocolError('not_member', `${volunteerId} was not given unit ${e.unitId}`);
    if (o.deltas.has(volunteerId)) return { duplicate: true };
    if (e.data.byteLength !== length * 4) throw new ProtocolError('bad_tensor', `${e.data.byteLength} bytes where a delta has ${length} f32 values`);
    const delta = new Float32Array(length);
    new Uint8Array(delta.buffer).set(e.data);
    o.deltas.set(volunteerId, delta);
    o.deferred.get(volunteerId)?.();
    o.deferred.delete(volunteerId);
    this.judge(o);
    return {};
  }

  /** The steps of the unit `volunteerId` trains as its work for sync `seq` when it is that unit's original (else null). */
  unitWorkOf(volunteerId: string, seq: number): number | null {
    const o = this.open;
    return o && seq === o.unit.seq + 1 && [...o.asked.keys()][0] === volunteerId ? o.unit.steps : null;
  }

  /**
   * A commit's credit for `volunteerId` (`grant`): given now, or, for the original and replica of the
   * open unit whose sync this was, once it has uploaded (never, if it does not).
   */
  credit(volunteerId: string, seq: number, grant: () => void): void {
    const o = this.open;
    const [original, replica] = o ? [...o.asked.keys()] : [];
    if (o && seq === o.unit.seq + 1 && (volunteerId === original || volunteerId === replica) && !o.deltas.has(volunteerId)) o.deferred.set(volunteerId, grant);
    else grant();
  }

  /** The original or replica still owes its upload UPLOAD_WITHIN_SYNCS syncs after the unit began: a fault, and no credit for it. */
  private faultMissingUploads(o: OpenUnit): void {
    const present = new Set(this.host.members().map((m) => m.volunteerId));
    for (const id of [...o.asked.keys()].slice(0, 2)) {
      if (o.deltas.has(id) || !present.has(id) || o.missing.has(id)) continue;
      o.missing.add(id);
      o.deferred.delete(id);
      const why = `unit ${o.unit.unitId}: did not upload its ${id === [...o.asked.keys()][0] ? 'original' : 'replica'} within ${UPLOAD_WITHIN_SYNCS} syncs`;
      this.host.deps.log(`job ${this.host.jobId}: ${id} ${why}; its credit for sync ${o.unit.seq + 1} is withheld`);
      this.host.deps.count('replicas_missing');
      this.host.fault(o.asked.get(id)!, why);
    }
  }

  /** A member left the job: a unit waiting on it cannot finish. */
  left(volunteerId: string): void {
    const o = this.open;
    if (o?.asked.has(volunteerId) && !o.deltas.has(volunteerId)) this.close(`unresolved: ${volunteerId} left before uploading`);
  }

  private judge(o: OpenUnit): void {
    const [original, replica, third] = [...o.asked.keys()];
    const a = o.deltas.get(original), b = o.deltas.get(replica);
    if (!a || !b) return;
    const ab = compareReplicas(a, b);
    if (!o.tieBreak) {
      if (ab.agree) {
        this.host.verified(o.asked.get(original)!);
        this.host.verified(o.asked.get(replica)!);
        this.host.deps.count('replicas_agreed');
        return this.close(null);
      }
      this.host.deps.log(`job ${this.host.jobId}: unit ${o.unit.unitId}: ${original} and ${replica} disagree (${describe(ab)}); asking a third member`);
      this.host.deps.count('replicas_disagreed');
      const taken = new Set([original, replica].map((id) => this.host.networkOf(id)));
      const networksCount = this.host.networkOf(original) !== null;
      // Where networks count, a tie-breaker has standing and a network of its own: a tie is one word against another.
      const candidates = this.host.members().filter((m) => o.holders.includes(m.volunteerId) && !o.asked.has(m.volunteerId)
        && (!networksCount || (this.host.hasStanding(m.identity) && !taken.has(this.host.networkOf(m.volunteerId)))));
      if (candidates.length === 0) return this.close(`unresolved: no third member${networksCount ? ' with standing on another network' : ''} to break the tie`);
      const third = pickFrom(candidates, this.rand);
      o.asked.set(third.volunteerId, third.identity);
      o.tieBreak = true;
      this.send(third.volunteerId, 'replica');
      return;
    }
    const c = o.deltas.get(third);
    if (!c) return;
    const ac = compareReplicas(a, c), bc = compareReplicas(b, c);
    const odd = ac.agree && !bc.agree ? replica : bc.agree && !ac.agree ? original : null;
    const evidence = `original ${original} vs replica ${replica}: ${describe(ab)}; vs third ${third}: ${describe(ac)} and ${describe(bc)}`;
    if (!odd) return this.close(`unresolved: ${evidence}`);
    const why = `unit ${o.unit.unitId}: its result disagreed with two other members' (${evidence})`;
    this.host.deps.log(`job ${this.host.jobId}: ${why}`);
    this.host.fault(o.asked.get(odd)!, why);
    for (const id of [original, replica, third]) if (id !== odd) this.host.verified(o.asked.get(id)!);
    this.close(null);
  }

  private send(volunteerId: string, role: ReplicaTask['role']): void {
    const { unit } = this.open!;
    const dataUrl = role === 'replica' ? this.host.shardUrl(unit.shard.index) : null;
    this.host.deps.toVolunteer(volunteerId, 'work:replicate', { jobId: this.host.jobId, unit, role, ...(dataUrl ? { dataUrl } : {}) });
  }

  private close(unresolved: string | null): void {
    if (unresolved) {
      this.host.deps.count('replicas_unresolved');
      this.host.deps.log(`job ${this.host.jobId}: unit ${this.open?.unit.unitId} closed ${unresolved}`);
    }
    for (const grant of this.open?.deferred.values() ?? []) grant();
    this.open = null;
  }
}

function pickFrom<T>(xs: T[], rand: () => number): T {
  return xs[Math.floor(rand() * xs.length)];
}

function describe(c: ReplicaComparison): string {
  return `cosine ${c.cosine.toFixed(5)}, norm difference ${(100 * c.normDifference).toFixed(2)}%`;
}
