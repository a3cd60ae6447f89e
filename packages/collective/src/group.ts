// Group averaging by per-part owners (BTARD's butterfly, arXiv 2106.11257): every member of a round
// is linked to every other. Member i cuts its vector into N parts and sends part j to member j, the
// part's owner; the owner screens the N contributions to its part, combines the accepted ones with
// the job's robust rule (protocol's robust.ts) and sends the result to everyone. Each member sends
// 2(N−1)/N·S bytes, as in ring allreduce, in 2 hops instead of 2(N−1). Nobody forwards anybody
// else's data: a member can spoil only its own contribution (screened, then bounded by the rule) or,
// as an owner, its part's aggregate, which the digests every member reports expose (GroupDigests).
//
// Validation (BTARD's random checks): after an average, `validate` has named members recompute named
// parts from the same contributions, so an owner that returned a wrong aggregate to everyone alike,
// which no digest comparison shows, is caught when its part is drawn.
//
// This file is the Group: its links and its ops; ordering ops, routing frames, aborts and lost peers
// are the Collective's (collective.ts), as for a Ring. The algorithm is ops/group-average.ts.
//
// Failure semantics are the ring's: an op rejects with a CollectiveError on deadline, lost member,
// abort or bad frame and never touches the caller's arrays. A member that fails an op sends an abort
// frame to every other member.
import { LIMITS, type Aggregation, type PartCheck, type QuantFormat } from '@tabfleet/protocol';
import { Collective, type CollectiveOptions } from './collective';
import { CollectiveError } from './errors';
import { GroupAverageRun, type GroupAverage } from './ops/group-average';
import { GroupValidateRun, type PartValidation } from './ops/group-validate';
import type { RingCounters, WireDType } from './ring-types';

export type { GroupAverage, GroupDigests } from './ops/group-average';
export type { PartValidation } from './ops/group-validate';

/** Members of one group: all-to-all links cost N−1 data channels per tab. */
export const MAX_GROUP_SIZE = LIMITS.maxGroupSize;

/** A group's members are in part order: the owner of part i is members[i]. Every member passes the same list. */
export type GroupOptions = CollectiveOptions;
export type GroupCounters = RingCounters;

export interface GroupAverageOptions {
  rule: Aggregation;
  /** Wire precision (default f32); contributions and aggregates are rounded to it before they leave. */
  dtype?: WireDType;
  /** For `trimmed-mean`. */
  trimFraction?: number;
  /** Paced rounds: each member's weight (its samples), in member order; the same on every member. */
  weights?: readonly number[];
  /** Parts go as their nonzero (index, value) pairs (DGC payloads); default: as dense values. */
  sparse?: boolean;
  /**
   * Contributions go block-quantized (int8 or E2M1 payloads, decoded: each part is encoded again along
   * the same blocks, so the bytes are the member's own), aggregates at `dtype`. Default: as aggregates.
   */
  quantized?: QuantFormat;
  deadlineMs?: number;
}

export class Group extends Collective {
  constructor(opts: GroupOptions) {
    if (opts.members.length > MAX_GROUP_SIZE) throw new CollectiveError('bad_argument', `a group has at most ${MAX_GROUP_SIZE} members, got ${opts.members.length}`);
    super(opts, 'group');
    this.listen();
  }

  /** The other members. */
  get peers(): string[] {
    return this.members.filter((m) => m !== this.self);
  }

  get linked(): string[] {
    return this.peers;
  }

  /** Every member hears every abort first-hand: nothing is passed on. */
  protected relaysAborts(): boolean {
    return false;
  }

  /**
   * Every member's `data` combined part by part with `opts.rule`; all members pass the same length
   * and get the same bytes. Also says which contributions to this member's part it refused, and the
   * digests the server cross-checks.
   */
  average(data: Float32Array, opts: GroupAverageOptions): Promise<GroupAverage> {
    const wire = { ...opts, dtype: wireDType(opts), sparse: opts.sparse ?? false };
    return this.schedule(opts.deadlineMs, (seq, deadline) => new GroupAverageRun(this, seq, deadline, data, wire));
  }

  /**
   * Sends this member's `contribution` (an average's `contribution`, as it went on the wire) to each
   * check's validator, and recomputes the parts this member validates, with the average's options.
   * Every member passes the same checks; a part's owner never validates it.
   */
  validate(contribution: Float32Array, checks: readonly PartCheck[], opts: GroupAverageOptions): Promise<PartValidation[]> {
    const seen = new Set<number>();
    for (const c of checks) {
      if (!Number.isInteger(c.part) || c.part < 0 || c.part >= this.size) throw new CollectiveError('bad_argument', `part ${c.part} of a ${this.size}-member group`);
      if (seen.has(c.part)) throw new CollectiveError('bad_argument', `part ${c.part} is checked twice`);
      seen.add(c.part);
      const v = this.members.indexOf(c.validator);
      if (v < 0 || v === c.part) throw new CollectiveError('bad_argument', `${c.validator} cannot validate part ${c.part}: ${v < 0 ? 'not a member' : 'it is the owner'}`);
    }
    const wire = { ...opts, dtype: wireDType(opts), sparse: opts.sparse ?? false };
    return this.schedule(opts.deadlineMs, (seq, deadline) => new GroupValidateRun(this, seq, deadline, contribution, checks, wire));
  }
}

function wireDType(opts: GroupAverageOptions): WireDType {
  const dtype = opts.dtype ?? 'f32';
  if (dtype !== 'f32' && dtype !== 'f16') throw new CollectiveError('bad_argument', `wire dtype must be f32 or f16, got ${String(dtype)}`);
  return dtype;
}
