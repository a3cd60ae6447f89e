// The soak's exchanger (server/src/testing/exchange.ts): each simulated volunteer's end is a
// MemoryTransport on one shared in-memory network (@tabfleet/collective's memory.ts), and a round is
// the op code a tab runs over WebRTC: a `Ring` allreduce of the mean (trusted jobs), or a `Group`
// average by per-part owners with the job's robust rule, its digests and refusals reported, the group
// kept open for `Group.validate` when the server names validators (untrusted jobs, the soak's).
// It does what the worker runtime does (packages/worker/src/runtime.ts, `peerExchange`, `onValidate`):
// members in round:begin's order, a deadline of the server's less the runtime's margin, links to
// volunteers no longer in the round closed, links opened and measured first (`connect`; links that
// never open are `unreachable`), `round:abort` and a lost server connection aborting the collective,
// and every other failure left as the collective's typed CollectiveError (`peer_lost`, `deadline`,
// `bad_frame`), which the volunteer reports with `round:failed`.
//
// Peers find each other by id on the shared network: no signaling goes through the server (the
// in-memory transport needs none; WebRTC's offer/answer relay is the one step of the runtime not run).
// A volunteer that closes (churn) or reconnects under a new id is killed on the network, so its
// neighbours lose it mid-round as they would lose a closed tab. Like the runtime, a volunteer's
// FrameRouter is made by its first ring or group, so frames that reach a fresh transport before then
// are lost (counted as framesBeforeRouter: a joiner's first round can stall to its deadline).
// Paced group rounds pass their weights to the rule, as the runtime does. Not modelled: paced ring rounds' scaled payloads, fp16 or sparse payloads, and
// lying owners (ExchangeRound.ownerLie).
import {
  CollectiveError, FrameRouter, Group, MemoryNetwork, Ring, type GroupAverageOptions, type MemoryNetworkOptions, type MemoryTransport, type RingCounters,
} from '@tabfleet/collective';
import { ROUND_DEADLINE_MARGIN_MS, type PartCheck, type PartValidationReport } from '@tabfleet/protocol';
import { ExchangeFailure, failureCodeOf, type Exchanger, type ExchangeResult, type ExchangeRound, type MemberExchange } from '@tabfleet/server/testing';

/** runtime.ts: how long a ring link may take to open before the member reports itself unreachable. */
const CONNECT_TIMEOUT_MS = 15_000;
/** Rounds each member remembers having completed through the collective (the soak asks about the last commit). */
const COMPLETED_KEPT = 8;
const FAILURE_SAMPLES = 4;
const STARTED_KEPT = 64;

export interface CollectiveExchangeCounters {
  /** Volunteer ends made (one per welcome). */
  members: number;
  /** Exchanges (a Ring allreduce or a Group average) begun, completed with a result, and failed (by the code the volunteer reports). */
  exchanges: number;
  completed: number;
  failures: Record<string, number>;
  /** The first few failures' messages per code (what happened, for the results file). */
  failureSamples: Record<string, string[]>;
  /** Group validations (`Group.validate`, every member of a checked round) completed and failed. */
  validations: number;
  validationFailures: number;
  /**
   * Frames that reached a volunteer's transport before its first ring or group made the transport's
   * FrameRouter (FrameRouter.of, as runtime.ts makes it: lazily): nobody routes them, so they are lost.
   * A joiner whose peers send before it has handled round:begin loses them, and its first round stalls.
   */
  framesBeforeRouter: number;
  /** Summed over every ring and group: frames and bytes its members sent, frames dropped as stale, duplicate or foreign. */
  wire: Pick<RingCounters, 'framesOut' | 'bytesOut' | 'stale' | 'duplicate' | 'foreign' | 'abortsSent'>;
}

export class CollectiveExchanger implements Exchanger {
  readonly net: MemoryNetwork;
  readonly counters: CollectiveExchangeCounters = {
    members: 0, exchanges: 0, completed: 0, failures: {}, failureSamples: {}, validations: 0, validationFailures: 0, framesBeforeRouter: 0,
    wire: { framesOut: 0, bytesOut: 0, stale: 0, duplicate: 0, foreign: 0, abortsSent: 0 },
  };
  /** Per round (the last STARTED_KEPT), the members that began their exchange. */
  private readonly started = new Map<string, Set<string>>();
  /** Per member id, the last rounds it completed through a Ring. */
  private readonly completedRounds = new Map<string, number[]>();

  constructor(opts: MemoryNetworkOptions = {}) {
    this.net = new MemoryNetwork(opts);
  }

  member(id: string): MemberExchange {
    this.counters.members++;
    return new CollectiveMember(this, this.net.endpoint(id));
  }

  /** Whether `member` completed round `roundId` through a Ring allreduce or a Group average (among its last few rounds). */
  completed(member: string, roundId: number): boolean {
    return this.completedRounds.get(member)?.includes(roundId) ?? false;
  }

  /** @internal runs one member's exchange, counting how it ended. */
  async counted(member: string, r: ExchangeRound, run: () => Promise<ExchangeResult>): Promise<ExchangeResult> {
    const c = this.counters;
    const roundId = r.roundId;
    c.exchanges++;
    const key = `${r.jobId}/${roundId}`;
    const started = this.started.get(key) ?? new Set<string>();
    started.add(member);
    this.started.set(key, started);
    if (this.started.size > STARTED_KEPT) this.started.delete(this.started.keys().next().value!);
    try {
      const out = await run();
      c.completed++;
      const list = this.completedRounds.get(member) ?? [];
      list.push(roundId);
      if (list.length > COMPLETED_KEPT) list.shift();
      this.completedRounds.set(member, list);
      return out;
    } catch (e) {
      const code = failureCodeOf(e);
      c.failures[code] = (c.failures[code] ?? 0) + 1;
      const samples = (c.failureSamples[code] ??= []);
      // A deadline means some member never took part: which ones had not begun the round here by then.
      const missing = code === 'deadline' ? `; not begun here: ${r.members.filter((m) => !started.has(m)).join(', ') || 'none'}` : '';
      if (samples.length < FAILURE_SAMPLES) samples.push(`${member} round ${roundId}: ${(e as Error).message}`.slice(0, 300) + missing);
      throw e;
    }
  }

  /** @internal */
  async countedValidation<T>(run: () => Promise<T>): Promise<T> {
    try {
      const out = await run();
      this.counters.validations++;
      return out;
    } catch (e) {
      this.counters.validationFailures++;
      throw e;
    }
  }

  /** @internal */
  recordCounters(c: RingCounters): void {
    for (const k of Object.keys(this.counters.wire) as (keyof CollectiveExchangeCounters['wire'])[]) this.counters.wire[k] += c[k];
  }

  /** Whether every one of `members` began its exchange of round `roundId` (among the last few rounds). */
  began(jobId: string, roundId: number, members: readonly string[]): boolean {
    const started = this.started.get(`${jobId}/${roundId}`);
    return !!started && members.every((m) => started.has(m));
  }

  /** Forgets what a volunteer that is gone completed. */
  forget(member: string): void {
    this.completedRounds.delete(member);
  }
}

class CollectiveMember implements MemberExchange {
  readonly id: string;
  /** Rings and groups open now, by round (a re-formed round may begin before the aborted one has unwound). */
  private readonly open = new Map<number, Ring | Group>();
  /** The last group round's group, kept open after its average for `round:validate` (as the runtime keeps it). */
  private openGroup: { group: Group; roundId: number; contribution: Float32Array; wire: GroupAverageOptions } | null = null;
  /** Peers it linked to in earlier rounds (closed once they are no longer in its round). */
  private neighbours = new Set<string>();
  private closed = false;
  /** Counts frames until the transport has its router (see framesBeforeRouter); null once it has. */
  private beforeRouter: (() => void) | null;

  constructor(private readonly owner: CollectiveExchanger, private readonly transport: MemoryTransport) {
    this.id = transport.self;
    this.beforeRouter = transport.onFrame(() => owner.counters.framesBeforeRouter++);
  }

  exchange(r: ExchangeRound, values: Float32Array): Promise<ExchangeResult> {
    return this.owner.counted(this.id, r, () => this.peerExchange(r, values));
  }

  /** runtime.ts peerExchange: a Ring allreduce of the mean, or a Group average by the job's rule. */
  private async peerExchange(r: ExchangeRound, values: Float32Array): Promise<ExchangeResult> {
    if (this.closed) throw new CollectiveError('aborted', `${this.id} is closed`);
    const deadlineMs = Math.max(1_000, r.deadline - Date.now() - ROUND_DEADLINE_MARGIN_MS);
    for (const peer of this.neighbours) if (!r.members.includes(peer)) this.transport.closeLink(peer, 'no longer in the round');
    this.closeGroup();
    const opts = { transport: this.transport, members: r.members, self: this.id, jobId: r.jobId, round: r.roundId, deadlineMs };
    const collective = r.mode === 'group' ? new Group(opts) : new Ring(opts);
    // The transport routes frames from now on (the collective made its FrameRouter).
    this.beforeRouter?.();
    this.beforeRouter = null;
    this.open.set(r.roundId, collective);
    this.neighbours = new Set([...this.neighbours].filter((p) => r.members.includes(p)).concat(collective.linked));
    let keepOpen = false;
    try {
      try {
        await collective.connect(Math.min(CONNECT_TIMEOUT_MS, deadlineMs));
      } catch (e) {
        if (e instanceof CollectiveError && e.code === 'aborted') throw e;
        throw new ExchangeFailure('unreachable', `could not open links to ${collective.linked.join(', ')}: ${(e as Error).message}`);
      }
      if (collective instanceof Group) {
        if (!r.group) throw new Error(`group round ${r.roundId} without the job's rule`);
        const wire: GroupAverageOptions = { rule: r.group.rule, trimFraction: r.group.trimFraction, ...(r.group.weights ? { weights: r.group.weights } : {}) };
        const out = await collective.average(values, wire);
        this.openGroup = { group: collective, roundId: r.roundId, contribution: out.contribution, wire };
        keepOpen = true;
        return { mean: out.mean, report: { refused: out.refused, digests: out.digests }, bytes: { sent: collective.counters.bytesOut, received: collective.counters.bytesIn } };
      }
      const mean = await collective.allreduce(values, { op: 'mean' });
      return { mean, report: null, bytes: { sent: collective.counters.bytesOut, received: collective.counters.bytesIn } };
    } finally {
      if (!keepOpen) this.closeCollective(r.roundId, collective);
    }
  }

  /** runtime.ts onValidate: the contribution's checked parts to their validators, and this member's parts recomputed. */
  async validate(_jobId: string, roundId: number, checks: readonly PartCheck[]): Promise<PartValidationReport[]> {
    const g = this.openGroup;
    if (!g || g.roundId !== roundId) return [];
    return this.owner.countedValidation(() => g.group.validate(g.contribution, checks, g.wire));
  }

  abort(roundId: number | null, reason: string): void {
    for (const [id, c] of this.open) if (roundId === null || id === roundId) c.abort(reason);
    if (this.openGroup && (roundId === null || this.openGroup.roundId === roundId)) this.closeGroup();
  }

  close(_reason: string): void {
    if (this.closed) return;
    this.closed = true;
    // Gone like a closed tab, with no abort frames: its links drop, its frames in flight are lost, its
    // neighbours notice (peer_lost) and its own ring or group fails.
    this.owner.net.kill(this.id);
    this.closeGroup();
    FrameRouter.of(this.transport).detach();
    this.owner.forget(this.id);
  }

  private closeGroup(): void {
    const g = this.openGroup;
    if (!g) return;
    this.openGroup = null;
    this.closeCollective(g.roundId, g.group);
  }

  private closeCollective(roundId: number, c: Ring | Group): void {
    c.close();
    this.owner.recordCounters(c.counters);
    if (this.open.get(roundId) === c) this.open.delete(roundId);
  }
}
