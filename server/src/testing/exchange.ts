// How a simulated volunteer exchanges its vector with the other members of a round, behind one
// interface: an `Exchanger` makes each volunteer's end (`MemberExchange`) under the id the server
// welcomed it with (a reconnection is a new id, so a new end, as a tab's new transport is).
// `RingOracle` (here) is the in-process one the server's tests use: once every member has contributed,
// the round's result is computed in one place (the plain mean for a ring round; for a group round what
// honest group averaging gives, with every member's digests). The soak supplies another over
// @tabfleet/collective's Ring on its in-memory network (bench/soak/collective-exchanger.ts), the op
// code a tab runs over WebRTC, so this package needs no dependency on collective.
//
// An exchange rejects with an error whose `code` is one of the collective's typed failures
// (CollectiveError carries the same codes): `aborted` (the server's round:abort, or a member's abort
// frame) is not reported, a new round follows; `peer_lost`, `deadline`, `bad_frame` and
// `unreachable` (links that never opened) are reported with `round:failed` as the worker runtime
// reports them; anything else as `internal`.
import { ROUND_DEADLINE_MARGIN_MS, combinePart, modelDigest, partRange, type Aggregation, type GroupReport, type PartCheck, type PartValidationReport } from '@tabfleet/protocol';

/**
 * How a group round combines (the job's rule, and in paced rounds each member's weight, in member
 * order, capped as the runtime caps them; as the job's compression has it, parts cut along `block`
 * values and aggregates rounded to f16); null for a ring round's plain mean.
 */
export type GroupRule = { rule: Aggregation; trimFraction: number; weights?: readonly number[]; block?: number; f16?: boolean } | null;

/**
 * What a lying owner does to its part's aggregate (it then reports and sends the result consistently);
 * `round` is what it knows of the round then (an adaptive liar decides by it; the aggregate back unchanged is no lie).
 */
export type OwnerLie = (aggregate: Float32Array, round: { roundId: number; members: readonly string[]; part: number }) => Float32Array;

export type ExchangeFailureCode = 'peer_lost' | 'deadline' | 'aborted' | 'bad_frame' | 'unreachable';

/** A typed failure of an exchange (the codes of the collective's CollectiveError, plus `unreachable`). */
export class ExchangeFailure extends Error {
  override name = 'ExchangeFailure';
  constructor(
    readonly code: ExchangeFailureCode,
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}

/** The round code `round:failed` reports for what an exchange rejected with (the runtime's mapping). */
export function failureCodeOf(e: unknown): 'aborted' | 'peer_lost' | 'deadline' | 'bad_frame' | 'unreachable' | 'internal' {
  const code = (e as { code?: unknown } | null)?.code;
  return code === 'aborted' || code === 'peer_lost' || code === 'deadline' || code === 'bad_frame' || code === 'unreachable' ? code : 'internal';
}

/** One round as a member sees it in `round:begin`. */
export interface ExchangeRound {
  jobId: string;
  roundId: number;
  /** In ring order (round:begin's members). */
  members: readonly string[];
  mode: 'ring' | 'group';
  /** The server's deadline for the round (epoch ms). */
  deadline: number;
  /** Group rounds: the job's rule (null in a ring round). */
  group: GroupRule;
  /** As the owner of a part in a group round: the lie it tells about the part's aggregate. */
  ownerLie?: OwnerLie;
}

export interface ExchangeResult {
  /** What this member holds after the round (identical bytes at every member of a ring). */
  mean: Float32Array;
  /** Group rounds: this member's honest report (digests, refusals). */
  report: GroupReport | null;
  /** Bytes this member sent and received in the round, where the exchanger measured them. */
  bytes?: { sent: number; received: number };
}

/** One volunteer's end of the exchange. */
export interface MemberExchange {
  readonly id: string;
  /** This member's part in a round: its vector in, the round's result out, or a typed failure. */
  exchange(round: ExchangeRound, values: Float32Array): Promise<ExchangeResult>;
  /** The server aborted the round (null: whatever round is open, e.g. on a lost server connection). */
  abort(roundId: number | null, reason: string): void;
  /**
   * `round:validate` of a finished group round, which every member of the round takes part in (each
   * sends its contribution's checked parts to their validators): what this member finds as the
   * honest validator of its parts (none when it validates none, or cannot tell).
   */
  validate(jobId: string, roundId: number, checks: readonly PartCheck[]): Promise<PartValidationReport[]>;
  /** The volunteer is gone (closed, or reconnected under a new id): its peers see it as lost. */
  close(reason: string): void;
}

export interface Exchanger {
  member(id: string): MemberExchange;
}

/** Finished group rounds kept for their validators, who ask right after the round (each holds every member's vector). */
const FINISHED_KEPT = 16;

interface OracleRound {
  jobId: string;
  roundId: number;
  members: string[];
  values: Map<string, Float32Array>;
  ownerLies: Map<string, OwnerLie>;
  waiters: ((r: { mean: Float32Array; reports: Map<string, GroupReport> | null }) => void)[];
}

/** A finished group round's contributions, for validators (the collective sends them over the group's links). */
interface FinishedRound {
  roundId: number;
  members: string[];
  inputs: Float32Array[];
  group: NonNullable<GroupRule>;
}

/**
 * Collects members' vectors per round and hands everyone the result once all have contributed: the
 * mean for a ring round; for a group round what honest group averaging gives (collective's group.ts:
 * each part screened and combined by the job's rule) with every member's honest digests. A member's
 * end gives up ROUND_DEADLINE_MARGIN_MS before the server's deadline (`deadline`), as the runtime's
 * does; it never fails otherwise.
 */
export class RingOracle implements Exchanger {
  private readonly rounds = new Map<string, OracleRound>();
  /** The last finished group rounds, by job and round (a Moshpit sync's groups finish side by side). */
  private readonly finished = new Map<string, FinishedRound>();

  member(id: string): MemberExchange {
    return {
      id,
      exchange: async (r, values) => {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const timeout = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new ExchangeFailure('deadline', 'simulated collective timed out')), Math.max(0, r.deadline - Date.now() - ROUND_DEADLINE_MARGIN_MS));
        });
        try {
          const out = await Promise.race([this.contribute(r.jobId, r.roundId, [...r.members], id, values, r.group, r.ownerLie), timeout]);
          return { mean: out.mean, report: out.reports?.get(id) ?? null };
        } finally {
          clearTimeout(timer);
        }
      },
      // An aborted round never completes here: the member's next contribution drops it.
      abort: () => {},
      validate: async (jobId, roundId, checks) => {
        const found = checks.filter((c) => c.validator === id).map((c) => this.validate(jobId, roundId, c.part));
        return found.every((x) => x !== null) ? found : [];
      },
      close: () => {},
    };
  }

  contribute(
    jobId: string, roundId: number, members: string[], id: string, values: Float32Array, group: GroupRule = null, ownerLie?: OwnerLie,
  ): Promise<{ mean: Float32Array; reports: Map<string, GroupReport> | null }> {
    const key = `${jobId}/${roundId}`;
    // A member that contributes to a new round has left its earlier ones (aborted with some
    // contributions in): they will never complete, so they are dropped rather than kept for ever.
    // (Rounds of other members may run beside it: a Moshpit sync's groups.)
    for (const [k, old] of this.rounds) if (old.jobId === jobId && old.roundId < roundId && old.members.includes(id)) this.rounds.delete(k);
    let r = this.rounds.get(key);
    if (!r) this.rounds.set(key, (r = { jobId, roundId, members, values: new Map(), ownerLies: new Map(), waiters: [] }));
    r.values.set(id, values);
    if (ownerLie) r.ownerLies.set(id, ownerLie);
    const done = new Promise<{ mean: Float32Array; reports: Map<string, GroupReport> | null }>((resolve) => r.waiters.push(resolve));
    if (r.values.size === r.members.length) {
      const inputs = r.members.map((m) => r.values.get(m)!);
      const result = group ? groupAverage(roundId, r.members, inputs, group, r.ownerLies) : { mean: plainMean(inputs), reports: null };
      if (group) this.finished.set(key, { roundId, members: r.members, inputs, group });
      for (const k of this.finished.keys()) if (this.finished.size > FINISHED_KEPT) this.finished.delete(k);
      for (const w of r.waiters) w(result);
      this.rounds.delete(key);
    }
    return done;
  }

  /** What an honest validator of `part` finds in a finished group round (null: not one of the last finished). */
  validate(jobId: string, roundId: number, part: number): PartValidationReport | null {
    const f = this.finished.get(`${jobId}/${roundId}`);
    if (!f) return null;
    const len = f.inputs[0].length;
    const { start, end } = partRange(len, f.members.length, part, f.group.block);
    const parts = f.inputs.map((x) => x.subarray(start, end));
    const { aggregate, refused } = combinePart(parts, end - start, f.group.rule, { trimFraction: f.group.trimFraction, weights: f.group.weights, f16: f.group.f16 });
    return { part, received: parts.map((p) => modelDigest(p)), aggregate: aggregate ? modelDigest(aggregate) : '', refused: refused.map((x) => ({ member: f.members[x.index], reason: x.reason })) };
  }
}

function plainMean(inputs: Float32Array[]): Float32Array {
  const mean = new Float32Array(inputs[0].length);
  for (const v of inputs) for (let i = 0; i < mean.length; i++) mean[i] += v[i] / inputs.length;
  return mean;
}

/**
 * Group averaging of `inputs` (by member index), parts cut as the collective cuts them: honest,
 * except that an owner with a lie changes its part's aggregate and reports what it sent.
 */
function groupAverage(
  roundId: number, members: string[], inputs: Float32Array[], g: NonNullable<GroupRule>, ownerLies: ReadonlyMap<string, OwnerLie>,
): { mean: Float32Array; reports: Map<string, GroupReport> } {
  const n = members.length;
  const len = inputs[0].length;
  const mean = new Float32Array(len);
  const reports = new Map<string, GroupReport>(members.map((m) => [m, { refused: [], digests: { sent: [], received: [], aggregate: '', gathered: [] } }]));
  for (let j = 0; j < n; j++) {
    const { start, end } = partRange(len, n, j, g.block);
    const parts = inputs.map((x) => x.subarray(start, end));
    const combined = combinePart(parts, end - start, g.rule, { trimFraction: g.trimFraction, weights: g.weights, f16: g.f16 });
    const honest = combined.aggregate ?? new Float32Array(parts[0].length);
    const aggregate = ownerLies.get(members[j])?.(honest.slice(), { roundId, members, part: j }) ?? honest;
    mean.set(aggregate, start);
    const owner = reports.get(members[j])!;
    owner.refused = combined.refused.map((x) => ({ member: members[x.index], reason: x.reason }));
    owner.digests.received = parts.map((p) => modelDigest(p));
    owner.digests.aggregate = modelDigest(aggregate);
    members.forEach((m, i) => {
      const r = reports.get(m)!;
      r.digests.sent.push(owner.digests.received[i]);
      r.digests.gathered.push(owner.digests.aggregate);
    });
  }
  return { mean, reports };
}
