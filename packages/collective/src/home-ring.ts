// A hierarchical ring (Paddle Fleet's hierarchical allreduce, by locality): members behind one
// address (a home: one NAT, one LAN) reduce over their LAN first, one of them (the home's leader)
// speaks for the home in the ring among homes, and hands the result back inside the home. A home's
// uplink then carries one member's ring traffic, 2(L − 1)/L of the vector each way for L homes,
// instead of one copy per tab whose ring neighbour sits elsewhere.
//
// allreduce: (1) the home's ring sums its members' vectors (op 'sum'; over the LAN); (2) the leaders'
// ring sums the homes' sums (each home thereby weighs as its members together: the flat ring's
// weights, paced scaling included, carry over unchanged); the leaders divide by the number of
// members (mean) and round to f16 when the wire is f16, as the flat ring's segment owners do; (3)
// the leader broadcasts that result in f32 inside its home, so every member ends with the same bytes.
// Sums of integers are exact, so with them the result equals the flat ring's bit for bit.
//
// Failure: any stage's error ends the whole collective. A leader passes the error on to the other
// stage it takes part in (abort frames carry its code and blamed member), so every member of every
// home rejects with it, as every member of a flat ring does.
import { roundToF16 } from '@tabfleet/protocol';
import type { CollectiveOptions } from './collective';
import { CollectiveError } from './errors';
import { Ring } from './ring';
import type { AllreduceOptions, RingCounters } from './ring-types';

export interface HomeRingOptions extends Omit<CollectiveOptions, 'members'> {
  /** The homes in ring order, each its members in its own ring order; a home's first member is its leader. */
  homes: readonly (readonly string[])[];
}

export class HomeRing {
  /** Every member, home by home (the flat ring's members). */
  readonly members: readonly string[];
  readonly self: string;
  readonly round: number;
  /** Self's home and its leader. */
  readonly home: readonly string[];
  readonly leader: string;
  /** The ring inside self's home (null in a home of one). */
  readonly local: Ring | null;
  /** The ring of the homes' leaders (null unless self leads a home, or when there is one home). */
  readonly wide: Ring | null;

  constructor(private readonly opts: HomeRingOptions) {
    const { homes, self } = opts;
    if (homes.length === 0 || homes.some((h) => h.length === 0)) throw new CollectiveError('bad_argument', 'every home needs at least one member');
    this.members = homes.flat();
    if (new Set(this.members).size !== this.members.length) throw new CollectiveError('bad_argument', `a member is in two homes: ${homes.map((h) => h.join('+')).join(', ')}`);
    const home = homes.find((h) => h.includes(self));
    if (!home) throw new CollectiveError('bad_argument', `${self} is in none of the homes [${homes.map((h) => h.join('+')).join(', ')}]`);
    this.self = self;
    this.round = opts.round;
    this.home = [...home];
    this.leader = home[0];
    const base = { ...opts, homes: undefined };
    // The two rings route by (job, round): the home's ring takes a job key of its own.
    this.local = home.length > 1 ? new Ring({ ...base, members: this.home, jobId: `${opts.jobId}/home` }) : null;
    this.wide = self === this.leader && homes.length > 1 ? new Ring({ ...base, members: homes.map((h) => h[0]) }) : null;
  }

  get size(): number {
    return this.members.length;
  }

  /** Whom self exchanges frames with: its home's ring neighbours and, as a leader, the neighbouring leaders. */
  get linked(): string[] {
    return [...new Set([...(this.local?.linked ?? []), ...(this.wide?.linked ?? [])])];
  }

  /** Both rings' counters added up. */
  get counters(): RingCounters {
    const out = { ...(this.local?.counters ?? this.wide?.counters ?? emptyCounters()) };
    if (this.local && this.wide) for (const k of Object.keys(out) as (keyof RingCounters)[]) out[k] += this.wide.counters[k];
    return out;
  }

  async connect(deadlineMs?: number): Promise<void> {
    await this.guard(Promise.all([this.local?.connect(deadlineMs), this.wide?.connect(deadlineMs)]));
  }

  linkRttMs(): Record<string, number> {
    return { ...this.local?.linkRttMs(), ...this.wide?.linkRttMs() };
  }

  /**
   * Sum (or mean) of every member's `data` over all homes, as a new array (`data` is never modified).
   * `deadlineMs` bounds the three stages together.
   */
  async allreduce(data: Float32Array, opts: AllreduceOptions = {}): Promise<Float32Array> {
    const dtype = opts.dtype ?? 'f32';
    const op = opts.op ?? 'sum';
    if (op !== 'sum' && op !== 'mean') throw new CollectiveError('bad_argument', `op must be sum or mean, got ${String(op)}`);
    const clock = (this.local ?? this.wide)?.clock;
    const end = clock ? clock.now() + (opts.deadlineMs ?? this.opts.deadlineMs ?? 60_000) : 0;
    const left = () => Math.max(1, end - clock!.now());
    return this.guard((async () => {
      const homeSum = this.local ? await this.local.allreduce(data, { op: 'sum', dtype, deadlineMs: left() }) : data;
      let result: Float32Array | null = null;
      if (this.self === this.leader) {
        const sum = this.wide ? await this.wide.allreduce(homeSum, { op: 'sum', dtype, deadlineMs: left() }) : homeSum;
        result = Float32Array.from(sum);
        if (op === 'mean') for (let i = 0; i < result.length; i++) result[i] /= this.size;
        if (dtype === 'f16') roundToF16(result, 0, result.length);
      }
      return this.local ? this.local.broadcast(this.leader, result, { dtype: 'f32', deadlineMs: left() }) : result!;
    })());
  }

  /** Rejects what is in flight with 'aborted' (the server's round:abort) in both rings, and tells the others. */
  abort(reason = 'aborted'): void {
    this.local?.abort(reason);
    this.wide?.abort(reason);
  }

  close(): void {
    this.local?.close();
    this.wide?.close();
  }

  /** A stage's failure ends the other ring too, with the same error, so its members hear what happened. */
  private async guard<T>(p: Promise<T>): Promise<T> {
    try {
      return await p;
    } catch (e) {
      const err = e instanceof CollectiveError ? e : new CollectiveError('aborted', (e as Error).message);
      this.local?.abort(err.message, err);
      this.wide?.abort(err.message, err);
      throw e;
    }
  }
}

function emptyCounters(): RingCounters {
  return {
    opsStarted: 0, opsCompleted: 0, opsFailed: 0, framesIn: 0, bytesIn: 0, framesOut: 0, bytesOut: 0,
    stale: 0, duplicate: 0, foreign: 0, early: 0, earlyDropped: 0, bad: 0, abortsSent: 0, abortsReceived: 0,
  };
}
