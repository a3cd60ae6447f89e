// The discrete-event simulator of one job's round clock. It drives the real JobCoordinator
// (server/src/coordinator, with its SQLite store) through its injected clock; only the volunteers are
// simulated: each step's compute time is drawn from a lognormal around a measured median (or from
// measured work times; a paced member stops at its budget as the runtime does), model loads and
// ring allreduces take the time a link model gives them (bandwidth, latency, frames pipelined around
// the ring), and volunteers leave as a Poisson process (each departure replaced by a joiner).
// Simulated time runs as fast as the coordinator handles its events. A scenario with `groupSize` is a Moshpit job: the coordinator splits each sync into groups
// (grouped-sync.ts), each a ring of its own, so it may hold up to 10,000 members.
// An untrusted scenario (`attackers`) is an untrusted Moshpit job: the server draws random groups and
// checks each (checked-groups.ts); the members average in them as simulated-group.ts computes, some of
// them attackers, and report, validate and give evidence as the runtime does (see Scenario.attackers).
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { anotherStepFits, capabilitiesSchema, checksumOf, layoutOf, FRAME_HEADER_BYTES, jobSpecSchema, LIMITS, maxChunkElements, modelDigest, mulberry32, pacedStepCeiling,
  useNativeSha256, type JobSpec, type VolunteerServerEvents } from '@tabfleet/protocol';
import { checkpointOf, initialParams, JobCoordinator, SIM_CAPABILITIES, SqliteStore, type Clock, type CoordinatorDeps, type JobRecord } from '@tabfleet/server/testing';
import { evidenceOf, groupRound, validatePart, type Attack, type GroupOutcome } from './simulated-group';
import { distribution } from './stats';

// Node's SHA-256 for model digests, as the server sets it (server/src/digests.ts): untrusted groups take thousands per sync.
useNativeSha256((data) => createHash('sha256').update(data).digest('hex'));

/** Timers in simulated time, run in order: the coordinator's deadlines and the members' work. */
class SimClock implements Clock {
  t = 0;
  private seq = 0;
  private readonly heap: { at: number; seq: number; fn: () => void; live: boolean }[] = [];
  now = () => this.t;
  after(ms: number, fn: () => void): () => void {
    const timer = { at: this.t + Math.max(0, ms), seq: this.seq++, fn, live: true };
    this.push(timer);
    return () => void (timer.live = false);
  }
  /** Runs events until simulated time `end` or until none are left. */
  runUntil(end: number): void {
    while (this.heap.length && this.heap[0].at <= end) {
      const next = this.pop()!;
      if (!next.live) continue;
      this.t = next.at;
      next.fn();
    }
    this.t = Math.max(this.t, end);
  }
  private less(a: { at: number; seq: number }, b: { at: number; seq: number }) {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }
  private push(x: (typeof this.heap)[number]) {
    const h = this.heap;
    h.push(x);
    for (let i = h.length - 1; i > 0; ) {
      const p = (i - 1) >> 1;
      if (!this.less(h[i], h[p])) break;
      [h[i], h[p]] = [h[p], h[i]];
      i = p;
    }
  }
  private pop() {
    const h = this.heap;
    const top = h[0];
    const last = h.pop()!;
    if (h.length) {
      h[0] = last;
      for (let i = 0; ; ) {
        const l = 2 * i + 1, r = l + 1;
        let m = i;
        if (l < h.length && this.less(h[l], h[m])) m = l;
        if (r < h.length && this.less(h[r], h[m])) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m], h[i]];
        i = m;
      }
    }
    return top;
  }
}

/** Dimensions of the synthetic vector that stands in for a member's model. */
export const CONSENSUS_DIMS = 8;

/** A member's synthetic vector: 8 dims (trusted), or the stand-in model's f32 parameters (untrusted). */
type Vector = Float64Array | Float32Array;

/** The members' synthetic vectors through the coordinator's groups: when they first come within 1% of their mean. */
class Consensus {
  reachedAt: number | null = null;
  private start: number | null = null;
  private lastSeq = 0;
  private readonly checkpoints = new Map<number, Vector>();

  /** At each sync's first round: the spread of the members' vectors since the sync before. */
  syncBegins(seq: number, members: () => Vector[]): void {
    if (seq <= this.lastSeq || this.reachedAt !== null) return;
    this.lastSeq = seq;
    const xs = members();
    if (!xs.length) return;
    const dims = xs[0].length;
    const mean = new Float64Array(dims);
    for (const x of xs) for (let k = 0; k < dims; k++) mean[k] += x[k] / xs.length;
    const distance = (x: Vector) => {
      let sum = 0;
      for (let k = 0; k < dims; k++) sum += (x[k] - mean[k]) ** 2;
      return Math.sqrt(sum);
    };
    const spread = xs.reduce((worst, x) => Math.max(worst, distance(x)), 0);
    this.start ??= spread;
    if (seq > 1 && spread <= 0.01 * this.start) this.reachedAt = seq - 1;
  }

  /** A group committed: its members adopt their mean. */
  average(group: { x: Vector }[]): void {
    if (!group.length) return;
    const mean = new Float64Array(CONSENSUS_DIMS);
    for (const m of group) for (let k = 0; k < CONSENSUS_DIMS; k++) mean[k] += m.x[k] / group.length;
    for (const m of group) m.x = mean.slice();
  }

  checkpointed(seq: number, x: Vector): void {
    this.checkpoints.set(seq, x.slice());
  }

  /** A joiner loaded the model of `seq`: the checkpoint's vector (the initial model: its own). */
  loaded(seq: number, own: Vector): Vector {
    return this.checkpoints.get(seq)?.slice() ?? own;
  }
}

export interface Scenario {
  members: number;
  /** Share of members leaving per 10 minutes (each replaced by a joiner). */
  churnPer10Min: number;
  /** The job's pacing: H steps each, or paced by the server (budget: H steps of the fastest, at least EXCHANGE_BUDGET_FACTOR × the exchange). */
  pacing: 'fixed' | 'paced';
  /** Simulated time. */
  durationMs: number;
  /** Median ms per local step and the lognormal's sigma (spread between and within members). */
  stepMs: number;
  stepSigma: number;
  /** Link model: bytes per second and one-way latency of every link. */
  bandwidthBytesPerSec: number;
  latencyMs: number;
  seed: number;
  /** Measured times from a commit to the member's ready (its local work), drawn with replacement instead of the lognormal steps (fixed H). */
  workMs?: readonly number[];
  /** Moshpit groups of at most this many (the job's `groupSize`); absent: the job is one ring. */
  groupSize?: number;
  /** Local steps per sync (paced: the nominal steps, capped at 4×); default SPEC_BASE's 8. */
  H?: number;
  /**
   * Members in `count` regions (each joiner in one at random, its capabilities' region hint): a link
   * inside a region has `latencyMs`, across regions `crossLatencyMs`, so a ring that spans regions
   * runs at the cross latency. `regional`: the job lays its Moshpit groups out by region (the spec's
   * regionalGroups); else at random. `fromRoundTrips`: members give no hint, and report the round
   * trips to their ring neighbours (twice the link's latency) in their round results, as the worker
   * runtime does, so the job's localities are what the server clusters from them.
   */
  regions?: { count: number; crossLatencyMs: number; regional: boolean; fromRoundTrips?: boolean };
  /**
   * An untrusted Moshpit job (trust untrusted, `groupSize` required): the server draws each sync's
   * groups at random and checks each (digests, validators, disputes settled by its recomputation); a
   * group that fails sits out its sync. `share` of the members are attackers, their attacks dealt in
   * turn from `kinds` (simulated-group.ts). The checks run on a stand-in model (STAND_IN_GPT's f32
   * parameters, each member's drawn at random: the consensus vector), while the link model times the
   * mlp-fashion payload. A group round takes groupAverageMs; a validator's part and a member's
   * evidence one link's time for a part. An evicted member rejoins under a fresh identity a second
   * later (an attacker as the same attacker: a Sybil), so attackers stay `share` of the members.
   */
  attackers?: { share: number; kinds: readonly Attack[] };
}

/** What the untrusted checks did in a run (ScenarioResult.untrusted). */
export interface UntrustedFigures {
  /** Members evicted, honest ones and attackers by attack. */
  evicted: { honest: number; byAttack: Record<string, number> };
  /** The coordinator's counters: groups committed, rerun and failed, contributions most owners refused, digest mismatches, validated groups, disputes. */
  counters: Record<string, number>;
  /** Honest members' compute ÷ their time in the job (the attackers' beside it in `utilization`). */
  honestUtilization: number;
}

export interface ScenarioResult {
  scenario: Scenario;
  refused?: string;
  syncs: number;
  aborted: number;
  evictions: number;
  /**
   * Commit-to-commit time of syncs as members see them (ms: each member's gaps between the commits it
   * received), and round time (a ring's begin to its commit; in a Moshpit job, each group's).
   */
  syncMs: ReturnType<typeof distribution> | null;
  roundMs: ReturnType<typeof distribution> | null;
  /** A sync's exchange: its begin to its last group's commit (one ring: its round), as the server records the sync. */
  exchangeMs: ReturnType<typeof distribution> | null;
  /** Bytes each member sends per ring round (the link model's; a Moshpit job's: a full group's). */
  bytesSentPerRound: number;
  /** Members' local compute ÷ their time in the job (work under way when the run ends counts; work a leaver dropped does not). */
  utilization: number;
  /**
   * Syncs until every member's synthetic vector is within 1% of the members' mean (max distance,
   * relative to that at the first sync), or null. Each member starts from an independent random
   * 8-dim vector; a committed group's members adopt their mean; a joiner loads the vector of the
   * checkpoint it loads (its uploader's) and counts from then on. No local steps move the vectors.
   */
  consensusSyncs: number | null;
  /** Server CPU (user + system) per committed sync, ms; and wall time the simulation took. */
  serverCpuMsPerSync: number;
  wallMs: number;
  /** Untrusted scenarios: what the checks did; consensusSyncs is then of honest members only. */
  untrusted?: UntrustedFigures;
}

/** The stand-in model of untrusted scenarios: the smallest GPT shape that cuts into 16 parts of 104 values or more (1,672 f32). */
export const STAND_IN_GPT = { layers: 1, heads: 1, width: 8, context: 8 } as const;
const STAND_IN_REF = { preset: 'gpt', gpt: STAND_IN_GPT, tokenizer: 'chars' } as const;

/** The coordinator's counters an untrusted run reports. */
const UNTRUSTED_COUNTERS = ['groups_committed', 'groups_rerun', 'groups_failed', 'contributions_refused', 'digest_mismatches', 'rounds_validated', 'validation_disputes', 'accusations_unsettled'];

export const SPEC_BASE = {
  preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 8, trust: 'trusted', hyperparameters: { lr: 0.05, batchSize: 32 },
  targetSteps: 10_000_000, evalEverySteps: 10_000_000, checkpointEvery: 100_000,
} as const;

/** The frames one member sends for its 1/N segment of a `bytes`-byte f32 model: payloads of at most a frame's, each with its header. */
function segmentFrames(n: number, bytes: number): number[] {
  const perFrame = maxChunkElements('f32') * 4;
  const frames: number[] = [];
  for (let left = Math.ceil(bytes / n / 4) * 4; left > 0; left -= perFrame) frames.push(Math.min(perFrame, left) + FRAME_HEADER_BYTES);
  return frames;
}

/**
 * The ring allreduce of `bytes` among `n` members on the modeled links, as collective's allreduce runs
 * it: 2(N−1) steps, each sending a 1/N segment in frames; frame c of a step leaves once frame c of the
 * step before has arrived (it is what it reduces or forwards) and the link is free. A link sends at the
 * bandwidth and delivers `latencyMs` later. Every member does the same, so one link's timeline is the
 * ring's. (The model before it was checked against real rounds, 2(N−1) × (latency + segment time),
 * ignored that frames pipeline: it predicted 1,700 ms for the 1,360 ms measured at N = 8.)
 */
export function ringAllreduceMs(n: number, bytes: number, s: Pick<Scenario, 'bandwidthBytesPerSec' | 'latencyMs'>): number {
  if (n <= 1) return 0;
  const frames = segmentFrames(n, bytes);
  let arrived = frames.map(() => 0);
  let linkFree = 0;
  for (let step = 0; step < 2 * (n - 1); step++) {
    arrived = frames.map((frameBytes, c) => {
      linkFree = Math.max(linkFree, arrived[c]) + (1000 * frameBytes) / s.bandwidthBytesPerSec;
      return linkFree + s.latencyMs;
    });
  }
  return arrived[arrived.length - 1];
}

/**
 * A group average among `n` members (collective's Group, untrusted jobs): each member sends its n − 1
 * parts to their owners over its link, then each owner sends its aggregate to the n − 1 others; two
 * hops of latency, each member sending what it would send in a ring (2(N−1) segments).
 */
export function groupAverageMs(n: number, bytes: number, s: Pick<Scenario, 'bandwidthBytesPerSec' | 'latencyMs'>): number {
  if (n <= 1) return 0;
  const partBytes = segmentFrames(n, bytes).reduce((a, b) => a + b, 0);
  return 2 * (((n - 1) * 1000 * partBytes) / s.bandwidthBytesPerSec + s.latencyMs);
}

/** Bytes one member sends in that ring allreduce: 2(N−1) segments with their frame headers. */
export function ringAllreduceBytes(n: number, bytes: number): number {
  return n <= 1 ? 0 : 2 * (n - 1) * segmentFrames(n, bytes).reduce((a, b) => a + b, 0);
}

/**
 * Simulated time run between turns of Node's event loop, when the store's queued writes complete. A
 * checkpoint is usable only once stored, so a long slice delays the syncs after it (10 s slices
 * made N = 256 with churn show a sync p99 of 11 s, 3.3 s with 200 ms slices).
 */
const SLICE_MS = 100;

export async function simulate(s: Scenario): Promise<ScenarioResult> {
  const empty = { syncs: 0, aborted: 0, evictions: 0, syncMs: null, roundMs: null, exchangeMs: null, bytesSentPerRound: 0, utilization: 0, consensusSyncs: null, serverCpuMsPerSync: 0, wallMs: 0 };
  if (s.members > LIMITS.maxWorkersPerJob && !s.groupSize) return { scenario: s, refused: `a job in one ring holds at most ${LIMITS.maxWorkersPerJob} members (give it a groupSize)`, ...empty };
  if (s.attackers && !s.groupSize) return { scenario: s, refused: 'an untrusted scenario averages in Moshpit groups: give it a groupSize', ...empty };
  if (s.attackers && !(s.attackers.share >= 0 && s.attackers.share < 1 && (s.attackers.share === 0 || s.attackers.kinds.length > 0))) {
    return { scenario: s, refused: `attackers: a share in [0, 1) with at least one kind of attack (got ${s.attackers.share}, [${s.attackers.kinds.join(', ')}])`, ...empty };
  }
  const untrusted = !!s.attackers;
  const dir = mkdtempSync(join(tmpdir(), 'tabfleet-sim-'));
  const store = new SqliteStore(dir);
  const clock = new SimClock();
  const random = mulberry32(s.seed); // seeded: a scenario is the same run twice
  const spec: JobSpec = jobSpecSchema.parse({ ...SPEC_BASE, pacing: s.pacing, minWorkers: Math.max(1, Math.floor(s.members / 2)), maxWorkers: s.members, H: s.H ?? SPEC_BASE.H,
    ...(s.groupSize ? { groupSize: s.groupSize } : {}), regionalGroups: s.regions?.regional ?? false,
    ...(untrusted ? { trust: 'untrusted', preset: 'gpt', dataset: 'text-corpus', gpt: STAND_IN_GPT } : {}) });
  // The stand-in's parameters (the padding between its tensors stays zero, as a checkpoint restores it).
  const standIn = layoutOf(STAND_IN_REF);
  const standInParams = (values: () => number) => {
    const x = new Float32Array(standIn.length);
    for (const p of standIn.entries) for (let i = p.offset; i < p.offset + p.size; i++) x[i] = values();
    return x;
  };
  /** A group's mean as a member holds it: the parameters (a sign-flipped or negated padding's −0 back to zero). */
  const paramsOf = (mean: Float32Array) => {
    const x = new Float32Array(standIn.length);
    for (const p of standIn.entries) x.set(mean.subarray(p.offset, p.offset + p.size), p.offset);
    return x;
  };
  // Group rounds' outcomes by round id, from their begin to their commit or abort.
  const outcomes = new Map<number, GroupOutcome>();
  const counters = new Map<string, number>();
  const evicted = { honest: 0, byAttack: {} as Record<string, number> };
  const flat = initialParams('mlp-fashion', 1);
  const digest = modelDigest(flat);
  const modelBytes = flat.length * 4;
  const checkpoint = checkpointOf('mlp-fashion', flat);
  let aborted = 0, evictions = 0;
  const syncsCommitted = new Set<number>(), gaps: number[] = [], rounds: number[] = [];
  /** Per sync: when its first round began and its last group committed. */
  const exchanges = new Map<number, { began: number; lastCommit: number | null }>();

  /** A simulated volunteer: its own step-time median, and what it is doing. */
  interface Sim {
    id: string; region: string | undefined; stepMs: number; joinedAt: number; leftAt: number | null; computeMs: number; lastWorkMs: number;
    workingSince: number | null; seq: number; lastCommitAt: number | null; gone: boolean; cancelWork: (() => void) | null; x: Vector; loaded: boolean; attack: Attack | null;
  }
  const sims = new Map<string, Sim>();
  const consensus = new Consensus();
  let nextId = 0;
  const lognormal = (median: number) => median * Math.exp(s.stepSigma * Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random()));
  const linkMs = (bytes: number) => s.latencyMs + (1000 * bytes) / s.bandwidthBytesPerSec;

  let c!: JobCoordinator;
  const handle = (id: string, event: string, payload: object) => {
    if (!sims.get(id) || sims.get(id)!.gone) return undefined;
    try {
      return c.handle(id, event as never, payload as never) as Record<string, unknown>;
    } catch {
      return undefined; // stale or refused: what a real volunteer would log and get past
    }
  };
  // A member's local work: `steps` steps, or with `budgetMs` (paced) steps while half of one more
  // still fits the budget at its median pace, at most pacedStepCeiling of them (engine trainWithin).
  const work = (m: Sim, steps: number, budgetMs?: number) => {
    let ms = 0, took = 0;
    if (s.workMs?.length) ms = s.workMs[Math.floor(random() * s.workMs.length)];
    else if (budgetMs === undefined) for (let i = 0; i < steps; i++) ms += lognormal(m.stepMs);
    else while (took < pacedStepCeiling(steps, spec.trust) && (took === 0 || anotherStepFits(ms, m.stepMs, budgetMs))) {
      ms += lognormal(m.stepMs);
      took++;
    }
    m.workingSince = clock.now();
    m.cancelWork = clock.after(ms, () => {
      m.cancelWork = null;
      m.workingSince = null;
      m.computeMs += ms;
      m.lastWorkMs = ms;
      handle(m.id, 'round:ready', { jobId: job.id, seq: m.seq + 1, step: 0, ...(took ? { steps: took } : {}) });
    });
  };
  // Each round's (each group's) members, evaluators and uploader, who answer after its commit as a volunteer does.
  const roundsBegun = new Map<number, { at: number; members: string[]; evaluators: string[]; uploader: string | null }>();
  const deps: CoordinatorDeps = {
    store, clock, timing: { roundTimeoutMs: 60_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 120_000 },
    toVolunteer: (to, event, payload) => {
      const x = payload as Record<string, any>;
      if (event === 'round:begin') {
        roundsBegun.set(x.roundId, { at: clock.now(), members: x.members, evaluators: x.evaluators, uploader: x.uploader });
        if (!exchanges.has(x.seq)) exchanges.set(x.seq, { began: clock.now(), lastCommit: null });
        // Members still loading hold no model of the job yet: not counted.
        // Untrusted: honest members only (attackers' vectors are theirs to spoil).
        consensus.syncBegins(x.seq, () => [...sims.values()].filter((m) => !m.gone && m.loaded && !m.attack).map((m) => m.x));
      }
      if (event === 'round:commit') committed(x.roundId, x.seq);
      if (event === 'round:abort') outcomes.delete(x.roundId);
      for (const id of Array.isArray(to) ? to : [to]) {
        const m = sims.get(id);
        if (m && !m.gone) deliver(m, event, x);
      }
    },
    toDashboards: () => {},
    watched: () => false,
    checkpointUrl: (jobId, seq) => `sim://${jobId}/${seq}`,
    count: (name) => {
      counters.set(name, (counters.get(name) ?? 0) + 1);
      if (name === 'rounds_aborted') aborted++;
      if (name === 'members_evicted') evictions++;
    },
    // SIM_LOG=1: the coordinator's log (evictions, failed groups, disputes) on simulated time.
    log: process.env.SIM_LOG ? (line) => console.log(`[${(clock.now() / 1000).toFixed(1)} s] ${line}`) : () => {},
  };

  function committed(roundId: number, seq: number): void {
    syncsCommitted.add(seq);
    const exchange = exchanges.get(seq);
    if (exchange) exchange.lastCommit = clock.now();
    const r = roundsBegun.get(roundId);
    roundsBegun.delete(roundId);
    if (!r) return;
    rounds.push(clock.now() - r.at);
    const outcome = outcomes.get(roundId);
    outcomes.delete(roundId);
    // A checked group's members adopt what its owners sent (a lying owner's part included).
    if (outcome?.mean) for (const id of r.members) sims.get(id)!.x = paramsOf(outcome.mean);
    else consensus.average(r.members.flatMap((id) => sims.get(id) ?? []));
    // Evaluators and the uploader answer once their own group has committed (untrusted: with the digest of the model they hold).
    for (const id of r.evaluators.filter((x) => r.members.includes(x))) {
      const checksum = untrusted ? modelDigest(sims.get(id)!.x as Float32Array) : digest;
      clock.after(linkMs(0), () => handle(id, 'metrics', { jobId: job.id, seq, checksum, accuracy: 0.5, loss: 1 }));
    }
    if (r.uploader && r.members.includes(r.uploader)) {
      const x = sims.get(r.uploader)!.x;
      consensus.checkpointed(seq, x);
      const data = checkpointData(x);
      clock.after(linkMs(modelBytes), () => handle(r.uploader!, 'checkpoint:upload', { jobId: job.id, seq, step: 0, data }));
    }
  }

  /** What an uploader uploads: the mlp-fashion initial model (trusted: the digests stand for it), or the stand-in model it holds. */
  const checkpointData = (x: Vector) => (untrusted ? checkpointOf(STAND_IN_REF, x as Float32Array) : checkpoint);

  /** A group round of an untrusted job: its members' outcome, computed once (simulated-group.ts), when its first member hears of it. */
  function outcomeOf(x: Record<string, any>): GroupOutcome {
    let outcome = outcomes.get(x.roundId);
    if (!outcome) {
      const members = (x.members as string[]).map((id) => ({ id, params: sims.get(id)!.x as Float32Array, attack: sims.get(id)!.attack }));
      outcome = groupRound(members, spec, x.steps);
      outcomes.set(x.roundId, outcome);
    }
    return outcome;
  }

  /** One link's time for a part of the payload (a validator's or the server's copy of it). */
  const partMs = (n: number) => linkMs(modelBytes / n);

  /** What a ping measures: twice the one-way latency between the two members' regions. */
  const roundTripMs = (m: Sim, peer: string) => 2 * (sims.get(peer)?.region === m.region ? s.latencyMs : s.regions!.crossLatencyMs);

  /** What a member's ring pings measure: the round trip to each neighbour. */
  function neighbourRoundTrips(m: Sim, ring: string[]): Record<string, number> {
    const i = ring.indexOf(m.id);
    const out: Record<string, number> = {};
    if (i < 0 || ring.length < 2) return out;
    for (const peer of [ring[(i + ring.length - 1) % ring.length], ring[(i + 1) % ring.length]]) out[peer] = roundTripMs(m, peer);
    return out;
  }

  function deliver(m: Sim, event: keyof VolunteerServerEvents, x: Record<string, any>): void {
    if (event === 'job:assign' && x.probePeers?.length && s.regions?.fromRoundTrips) {
      // The join probe (worker join-probe.ts): links opened and pinged in about two of the slowest round trips. Timed on its own here; the real runtime reports it before model:loaded.
      const rttMs = Object.fromEntries((x.probePeers as string[]).map((p) => [p, roundTripMs(m, p)]));
      clock.after(2 * Math.max(...Object.values(rttMs)), () => handle(m.id, 'peers:rtt', { jobId: job.id, rttMs }));
    } else if (event === 'model:load') {
      clock.after(linkMs(modelBytes), () => {
        const model = consensus.loaded(x.seq, m.x);
        const ack = handle(m.id, 'model:loaded', { jobId: job.id, seq: x.seq, checksum: untrusted ? modelDigest(model as Float32Array) : digest });
        if (ack?.admitted) {
          m.seq = x.seq;
          m.x = model;
          m.loaded = true;
          work(m, Number(ack.steps ?? spec.H), ack.budgetMs as number | undefined);
        }
      });
    } else if (event === 'round:begin' && x.mode === 'group') {
      const outcome = outcomeOf(x);
      const n = outcome.members.length;
      clock.after(groupAverageMs(n, modelBytes, s), () => {
        if (!outcome.mean) return void handle(m.id, 'round:failed', { jobId: job.id, roundId: x.roundId, code: 'bad_frame', message: 'every contribution to a part was refused' });
        handle(m.id, 'round:result', { jobId: job.id, roundId: x.roundId, checksum: checksumOf(outcome.mean), step: 0, group: outcome.reports.get(m.id),
          metrics: { loss: 1, samples: spec.H * 32, wallMs: m.lastWorkMs, computeMs: m.lastWorkMs, bytesSent: 0, bytesReceived: 0 } });
      });
    } else if (event === 'round:validate') {
      const outcome = outcomes.get(x.roundId);
      const parts = (x.checks as { part: number; validator: string }[]).filter((c) => c.validator === m.id).map((c) => c.part);
      if (outcome && parts.length) {
        clock.after(partMs(outcome.members.length), () => handle(m.id, 'round:validation', { jobId: job.id, roundId: x.roundId, parts: parts.map((p) => validatePart(outcome, p, spec)) }));
      }
    } else if (event === 'evidence:request') {
      const outcome = outcomes.get(x.roundId);
      if (outcome) clock.after(partMs(outcome.members.length), () => handle(m.id, 'evidence:upload', { jobId: job.id, roundId: x.roundId, part: x.part, data: evidenceOf(outcome, m.id, x.part) }));
    } else if (event === 'round:begin') {
      // A ring across regions runs at the slowest link's latency.
      const regions = new Set((x.members as string[]).map((id) => sims.get(id)?.region));
      const latencyMs = s.regions && regions.size > 1 ? s.regions.crossLatencyMs : s.latencyMs;
      const rttMs = s.regions?.fromRoundTrips ? neighbourRoundTrips(m, x.members as string[]) : undefined;
      clock.after(ringAllreduceMs(x.members.length, modelBytes, { bandwidthBytesPerSec: s.bandwidthBytesPerSec, latencyMs }), () =>
        handle(m.id, 'round:result', { jobId: job.id, roundId: x.roundId, checksum: digest, step: 0, metrics: { loss: 1, samples: spec.H * 32, wallMs: m.lastWorkMs,
          computeMs: m.lastWorkMs, bytesSent: 0, bytesReceived: 0 }, ...(rttMs ? { rttMs } : {}) }));
    } else if (event === 'round:commit') {
      if (m.lastCommitAt !== null) gaps.push(clock.now() - m.lastCommitAt);
      m.lastCommitAt = clock.now();
      m.seq = x.seq;
      work(m, Number(x.steps?.[m.id] ?? spec.H), x.budgetMs);
    } else if (event === 'checkpoint:request') {
      handle(m.id, 'checkpoint:upload', { jobId: job.id, seq: x.seq, step: 0, data: checkpointData(m.x) });
    } else if (event === 'job:end') {
      // Evicted (a member that leaves hears nothing more): its time in the job ends here.
      m.gone = true;
      m.leftAt ??= clock.now();
      m.cancelWork?.();
      if (untrusted) {
        if (m.attack) evicted.byAttack[m.attack] = (evicted.byAttack[m.attack] ?? 0) + 1;
        else evicted.honest++;
        clock.after(1_000, () => join1(m.attack));
      }
    }
  }

  const job: JobRecord = { id: 'sim', name: 'sim', state: 'waiting', createdAt: 0, updatedAt: 0, seq: 0, step: 0, spec };
  await store.createJob(job);
  c = await JobCoordinator.load(job, deps);
  const caps = capabilitiesSchema.parse(SIM_CAPABILITIES);
  const join1 = (attack: Attack | null = null) => {
    const id = `s${nextId++}`;
    // Each member's own median step time: volunteers differ by a lognormal factor too.
    const region = s.regions ? `r${Math.floor(random() * s.regions.count)}` : undefined;
    const stepMs = lognormal(s.stepMs);
    const x = untrusted ? standInParams(random) : Float64Array.from({ length: CONSENSUS_DIMS }, () => random());
    const m: Sim = { id, region, stepMs, joinedAt: clock.now(), leftAt: null, computeMs: 0, lastWorkMs: 0, workingSince: null, seq: 0, lastCommitAt: null,
      gone: false, cancelWork: null, x, loaded: false, attack };
    sims.set(id, m);
    try {
      // Untrusted: every joiner from an address of its own (a Sybil's too), or one member's eviction would keep out every joiner of the
      // shared unknown address (penalties.ts keeps a faulty network out). The server's network rules are off: an address is a network.
      const address = untrusted ? `10.${(nextId >> 16) & 255}.${(nextId >> 8) & 255}.${nextId & 255}` : undefined;
      c.join({ volunteerId: id, capabilities: region && !s.regions?.fromRoundTrips ? { ...caps, region } : caps, clientId: id, ...(address ? { address } : {}) });
    } catch {
      m.gone = true;
    }
  };
  // Attackers are dealt evenly through the joining order, their attacks in turn.
  const attackers = Math.round((s.attackers?.share ?? 0) * s.members);
  for (let i = 0; i < s.members; i++) {
    const k = Math.floor(((i + 1) * attackers) / s.members) - Math.floor((i * attackers) / s.members);
    join1(k ? s.attackers!.kinds[Math.floor((i * attackers) / s.members) % s.attackers!.kinds.length] : null);
  }
  // Departures: a Poisson process at churn × N per 10 minutes; each leaver is replaced after a second.
  const ratePerMs = (s.churnPer10Min * s.members) / 600_000;
  const nextDeparture = () => {
    if (ratePerMs <= 0) return;
    clock.after(-Math.log(1 - random()) / ratePerMs, () => {
      const present = [...sims.values()].filter((m) => !m.gone);
      if (present.length) {
        const m = present[Math.floor(random() * present.length)];
        m.gone = true;
        m.leftAt = clock.now();
        m.cancelWork?.();
        c.leave(m.id, 'left (simulated churn)');
        // Replaced in kind: an attacker's place by an attacker of the same attack.
        clock.after(1_000, () => join1(m.attack));
      }
      nextDeparture();
    });
  };
  nextDeparture();

  const cpu0 = process.cpuUsage(), t0 = performance.now();
  for (let t = 0; t < s.durationMs; t += SLICE_MS) {
    clock.runUntil(Math.min(s.durationMs, t + SLICE_MS));
    // The store writes on libuv's thread pool: simulated time waits for this slice's writes, so a
    // run does not depend on how fast the disk is (one turn of the loop was enough for sync writes).
    await c.flushed(false);
    await new Promise((r) => setImmediate(r));
  }
  const cpu = process.cpuUsage(cpu0);
  const wallMs = performance.now() - t0;
  const end = clock.now();
  let present = 0, busy = 0, honestPresent = 0, honestBusy = 0;
  for (const m of sims.values()) {
    const inJob = (m.leftAt ?? end) - m.joinedAt;
    // Work still under way when the simulated time ends is busy time too (else a run that ends just
    // after a commit would count every member's last sync as idle); work a leaver dropped is not.
    const worked = m.computeMs + (m.gone || m.workingSince === null ? 0 : end - m.workingSince);
    present += inJob;
    busy += worked;
    if (!m.attack) [honestPresent, honestBusy] = [honestPresent + inJob, honestBusy + worked];
  }
  c.release();
  await c.flushed();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  const syncs = syncsCommitted.size;
  const exchangeMs = [...exchanges.values()].flatMap((x) => (x.lastCommit === null ? [] : [x.lastCommit - x.began]));
  return {
    scenario: s, syncs, aborted, evictions,
    syncMs: gaps.length ? distribution(gaps) : null, roundMs: rounds.length ? distribution(rounds) : null, exchangeMs: exchangeMs.length ? distribution(exchangeMs) : null,
    bytesSentPerRound: ringAllreduceBytes(Math.min(s.members, s.groupSize ?? Infinity), modelBytes),
    utilization: present > 0 ? busy / present : 0, consensusSyncs: consensus.reachedAt,
    serverCpuMsPerSync: syncs ? (cpu.user + cpu.system) / 1000 / syncs : 0, wallMs,
    ...(untrusted ? { untrusted: { evicted, counters: Object.fromEntries(UNTRUSTED_COUNTERS.map((k) => [k, counters.get(k) ?? 0])),
      honestUtilization: honestPresent > 0 ? honestBusy / honestPresent : 0 } } : {}),
  };
}
