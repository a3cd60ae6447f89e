// `npm run simulate`: a discrete-event simulation of one job's round clock at scale. It drives the
// real JobCoordinator (server/src/coordinator, with its SQLite store) through its injected clock;
// only the volunteers are simulated: each step's compute time is drawn from a lognormal around a
// measured median, model loads and ring allreduces take the time a link model gives them (bandwidth,
// latency, 2(N−1) hops), and volunteers leave as a Poisson process (each departure replaced by a
// joiner). Simulated time runs as fast as the coordinator handles its events. It reports the sync
// time distribution, utilization (members' compute ÷ their time in the job), syncs committed and
// aborted, and the server's CPU per round. Limits: a job is one ring of at most 256 members (the
// coordinator does not run groups yet), so N = 1,024 and 10,000 are refused and reported as such.
// Consensus is measured apart from the coordinator, on the grouping the server is to use (protocol's
// moshpitGroups): synthetic member vectors averaged in Moshpit groups of 16, with departures.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { repoRoot } from '@tabfleet/headless';
import { capabilitiesSchema, jobSpecSchema, LIMITS, modelDigest, moshpitGroups, mulberry32, type JobSpec, type VolunteerServerEvents } from '@tabfleet/protocol';
import { checkpointOf, initialParams, JobCoordinator, SIM_CAPABILITIES, SqliteStore, type Clock, type CoordinatorDeps, type JobRecord } from '@tabfleet/server/testing';
import type { BenchOptions } from './run';
import { machineInfo } from './machine';
import { distribution } from './stats';

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

/** A deterministic generator (mulberry32), so a scenario is the same run twice. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

export interface Scenario {
  members: number;
  /** Share of members leaving per 10 minutes (each replaced by a joiner). */
  churnPer10Min: number;
  /** The job's pacing: H steps each, or paced by the server (budget: H steps of the fastest, at least 9 × the exchange). */
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
}

export interface ScenarioResult {
  scenario: Scenario;
  refused?: string;
  syncs: number;
  aborted: number;
  evictions: number;
  /** Commit-to-commit time of syncs (ms), and round time (begin to commit). */
  syncMs: ReturnType<typeof distribution> | null;
  roundMs: ReturnType<typeof distribution> | null;
  /** Members' local compute ÷ their time in the job. */
  utilization: number;
  /** Server CPU (user + system) per committed sync, ms; and wall time the simulation took. */
  serverCpuMsPerSync: number;
  wallMs: number;
}

const SPEC_BASE = {
  preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 8, trust: 'trusted', hyperparameters: { lr: 0.05, batchSize: 32 },
  targetSteps: 10_000_000, evalEverySteps: 10_000_000, checkpointEvery: 100_000,
} as const;

/** The ring allreduce of `bytes` among `n` members: 2(N−1) hops of a 1/N slice each. */
export function ringAllreduceMs(n: number, bytes: number, s: Pick<Scenario, 'bandwidthBytesPerSec' | 'latencyMs'>): number {
  if (n <= 1) return 0;
  return 2 * (n - 1) * (s.latencyMs + (1000 * bytes) / n / s.bandwidthBytesPerSec);
}

export async function simulate(s: Scenario): Promise<ScenarioResult> {
  const empty = { syncs: 0, aborted: 0, evictions: 0, syncMs: null, roundMs: null, utilization: 0, serverCpuMsPerSync: 0, wallMs: 0 };
  if (s.members > LIMITS.maxWorkersPerJob) return { scenario: s, refused: `a job holds at most ${LIMITS.maxWorkersPerJob} members in one ring; groups across a job are not built`, ...empty };
  const dir = mkdtempSync(join(tmpdir(), 'tabfleet-sim-'));
  const store = new SqliteStore(dir);
  const clock = new SimClock();
  const random = rng(s.seed);
  const spec: JobSpec = jobSpecSchema.parse({ ...SPEC_BASE, pacing: s.pacing, minWorkers: Math.max(1, Math.floor(s.members / 2)), maxWorkers: s.members });
  const flat = initialParams('mlp-fashion', 1);
  const digest = modelDigest(flat);
  const modelBytes = flat.length * 4;
  const checkpoint = checkpointOf('mlp-fashion', flat);
  let aborted = 0, evictions = 0;
  const commits: number[] = [], rounds: number[] = [];

  /** A simulated volunteer: its own step-time median, and what it is doing. */
  interface Sim { id: string; stepMs: number; joinedAt: number; leftAt: number | null; computeMs: number; lastWorkMs: number; seq: number; gone: boolean; cancelWork: (() => void) | null }
  const sims = new Map<string, Sim>();
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
  const work = (m: Sim, steps: number) => {
    let ms = 0;
    for (let i = 0; i < steps; i++) ms += lognormal(m.stepMs);
    m.cancelWork = clock.after(ms, () => {
      m.cancelWork = null;
      m.computeMs += ms;
      m.lastWorkMs = ms;
      handle(m.id, 'round:ready', { jobId: job.id, seq: m.seq + 1, step: 0 });
    });
  };
  // Each round's evaluators and uploader, who answer after its commit as a volunteer does.
  const roundsBegun = new Map<number, { at: number; evaluators: string[]; uploader: string | null }>();
  const deps: CoordinatorDeps = {
    store, clock, timing: { roundTimeoutMs: 60_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 120_000 },
    toVolunteer: (to, event, payload) => {
      const x = payload as Record<string, any>;
      if (event === 'round:begin') roundsBegun.set(x.roundId, { at: clock.now(), evaluators: x.evaluators, uploader: x.uploader });
      if (event === 'round:commit') committed(x.roundId, x.seq);
      for (const id of Array.isArray(to) ? to : [to]) {
        const m = sims.get(id);
        if (m && !m.gone) deliver(m, event, x);
      }
    },
    toDashboards: () => {},
    watched: () => false,
    checkpointUrl: (jobId, seq) => `sim://${jobId}/${seq}`,
    count: (name) => {
      if (name === 'rounds_aborted') aborted++;
      if (name === 'members_evicted') evictions++;
    },
    log: () => {},
  };

  function committed(roundId: number, seq: number): void {
    commits.push(clock.now());
    const r = roundsBegun.get(roundId);
    roundsBegun.delete(roundId);
    if (!r) return;
    rounds.push(clock.now() - r.at);
    for (const id of r.evaluators) clock.after(linkMs(0), () => handle(id, 'metrics', { jobId: job.id, seq, checksum: digest, accuracy: 0.5, loss: 1 }));
    if (r.uploader) clock.after(linkMs(modelBytes), () => handle(r.uploader!, 'checkpoint:upload', { jobId: job.id, seq, step: 0, data: checkpoint }));
  }

  function deliver(m: Sim, event: keyof VolunteerServerEvents, x: Record<string, any>): void {
    if (event === 'model:load') {
      clock.after(linkMs(modelBytes), () => {
        const ack = handle(m.id, 'model:loaded', { jobId: job.id, seq: x.seq, checksum: digest });
        if (ack?.admitted) {
          m.seq = x.seq;
          work(m, Number(ack.steps ?? spec.H));
        }
      });
    } else if (event === 'round:begin') {
      clock.after(ringAllreduceMs(x.members.length, modelBytes, s), () =>
        handle(m.id, 'round:result', { jobId: job.id, roundId: x.roundId, checksum: digest, step: 0, metrics: { loss: 1, samples: spec.H * 32, wallMs: m.lastWorkMs, computeMs: m.lastWorkMs, bytesSent: 0, bytesReceived: 0 } }));
    } else if (event === 'round:commit') {
      m.seq = x.seq;
      work(m, Number(x.steps?.[m.id] ?? spec.H));
    } else if (event === 'checkpoint:request') {
      handle(m.id, 'checkpoint:upload', { jobId: job.id, seq: x.seq, step: 0, data: checkpoint });
    } else if (event === 'job:end') {
      m.gone = true;
      m.cancelWork?.();
    }
  }

  const job: JobRecord = { id: 'sim', name: 'sim', state: 'waiting', createdAt: 0, updatedAt: 0, seq: 0, step: 0, spec };
  await store.createJob(job);
  c = await JobCoordinator.load(job, deps);
  const caps = capabilitiesSchema.parse(SIM_CAPABILITIES);
  const join1 = () => {
    const id = `s${nextId++}`;
    // Each member's own median step time: volunteers differ by a lognormal factor too.
    const m: Sim = { id, stepMs: lognormal(s.stepMs), joinedAt: clock.now(), leftAt: null, computeMs: 0, lastWorkMs: 0, seq: 0, gone: false, cancelWork: null };
    sims.set(id, m);
    try {
      c.join({ volunteerId: id, capabilities: caps, clientId: id });
    } catch {
      m.gone = true;
    }
  };
  for (let i = 0; i < s.members; i++) join1();
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
        clock.after(1_000, join1);
      }
      nextDeparture();
    });
  };
  nextDeparture();

  const cpu0 = process.cpuUsage(), t0 = performance.now();
  // In slices, letting the store's queued writes run between them.
  for (let t = 0; t < s.durationMs; t += 10_000) {
    clock.runUntil(Math.min(s.durationMs, t + 10_000));
    await new Promise((r) => setImmediate(r));
  }
  const cpu = process.cpuUsage(cpu0);
  const wallMs = performance.now() - t0;
  const end = clock.now();
  let present = 0, busy = 0;
  for (const m of sims.values()) {
    present += (m.leftAt ?? end) - m.joinedAt;
    busy += m.computeMs;
  }
  c.release();
  await c.flushed();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  const gaps = commits.slice(1).map((t, i) => t - commits[i]);
  return {
    scenario: s, syncs: commits.length, aborted, evictions,
    syncMs: gaps.length ? distribution(gaps) : null, roundMs: rounds.length ? distribution(rounds) : null,
    utilization: present > 0 ? busy / present : 0,
    serverCpuMsPerSync: commits.length ? (cpu.user + cpu.system) / 1000 / commits.length : 0, wallMs,
  };
}

/** Moshpit groups at scale: members per group. */
export const CONSENSUS_GROUP = 16;
/** Dimensions of the synthetic vector that stands in for a member's model. */
const CONSENSUS_DIMS = 8;

/**
 * Rounds of Moshpit averaging (groups of CONSENSUS_GROUP) until every member is within 1% of the
 * members' mean, relative to the spread at the start: members start from independent random vectors
 * (no local steps between rounds), and each round a member leaves with probability `leaveP` before
 * averaging (its group averages without it) and is replaced by a joiner that loads a random member's
 * vector, as joiners load a checkpoint. Null if not within 100 rounds.
 */
export function consensusRounds(n: number, leaveP: number, seed = 1): number | null {
  const rand = mulberry32(seed);
  let xs = Array.from({ length: n }, () => Float64Array.from({ length: CONSENSUS_DIMS }, () => rand()));
  const distance = () => {
    const mean = new Float64Array(CONSENSUS_DIMS);
    for (const x of xs) for (let k = 0; k < CONSENSUS_DIMS; k++) mean[k] += x[k] / n;
    return Math.max(...xs.map((x) => Math.hypot(...x.map((v, k) => v - mean[k]))));
  };
  const start = distance();
  for (let round = 0; round < 100; round++) {
    const present = xs.map(() => rand() >= leaveP);
    for (const group of moshpitGroups(xs.map((_, i) => i), round, CONSENSUS_GROUP, seed)) {
      const stay = group.filter((i) => present[i]);
      if (!stay.length) continue;
      const mean = new Float64Array(CONSENSUS_DIMS);
      for (const i of stay) for (let k = 0; k < CONSENSUS_DIMS; k++) mean[k] += xs[i][k] / stay.length;
      for (const i of stay) xs[i] = mean.slice();
    }
    const stayed = xs.filter((_, i) => present[i]);
    xs = xs.map((x, i) => (present[i] || !stayed.length ? x : stayed[Math.floor(rand() * stayed.length)].slice()));
    if (distance() <= 0.01 * start) return round + 1;
  }
  return null;
}

/** The scenarios: N × churn, on 10 Mbit/s links with 40 ms latency and 45 ms steps (SwiftShader's MLP step). */
export function scenarios(quick: boolean): Scenario[] {
  const sizes = quick ? [16, 64] : [16, 256, 1_024, 10_000];
  const churns = quick ? [0, 0.2] : [0, 0.05, 0.2];
  const base = { durationMs: quick ? 120_000 : 1_800_000, stepMs: 45, stepSigma: 0.25, bandwidthBytesPerSec: 1.25e6, latencyMs: 40, seed: 1 };
  const pacings = quick ? (['fixed'] as const) : (['fixed', 'paced'] as const);
  return sizes.flatMap((members) => churns.flatMap((churnPer10Min) => pacings.map((pacing) => ({ ...base, members, churnPer10Min, pacing }))));
}

export async function run(opts: BenchOptions): Promise<void> {
  const results: ScenarioResult[] = [];
  for (const s of scenarios(opts.quick)) {
    if (s.members > LIMITS.maxWorkersPerJob && results.some((r) => r.scenario.members === s.members)) continue;
    const r = await simulate(s);
    results.push(r);
    console.log(r.refused
      ? `N=${s.members}: ${r.refused}`
      : `N=${s.members} churn ${s.churnPer10Min * 100}%/10 min, ${s.pacing}: ${r.syncs} syncs, ${r.aborted} aborted, sync p50 ${r.syncMs?.p50.toFixed(0)} ms p99 ${r.syncMs?.p99.toFixed(0)} ms, utilization ${r.utilization.toFixed(2)}, server CPU ${r.serverCpuMsPerSync.toFixed(2)} ms/sync (${(r.wallMs / 1000).toFixed(1)} s wall)`);
  }
  const at = (n: number, churn: number) => results.find((r) => r.scenario.members === n && r.scenario.churnPer10Min === churn && r.scenario.pacing === 'fixed' && !r.refused);
  const base16 = at(16, 0);
  const n10k = at(10_000, 0.05);
  // Departures per round: churn per 10 minutes over the rounds in 10 minutes (a group's sync at N = 16).
  const roundMs = base16?.syncMs?.p50 ?? 1_000;
  const consensus = [...new Set(scenarios(opts.quick).map((s) => s.members))].flatMap((members) => [...new Set(scenarios(opts.quick).map((s) => s.churnPer10Min))].map((churnPer10Min) => {
    const leaveP = (churnPer10Min * roundMs) / 600_000;
    const rounds = consensusRounds(members, leaveP);
    console.log(`consensus: N=${members}, churn ${churnPer10Min * 100}%/10 min (${(100 * leaveP).toFixed(3)}% per round): ${rounds ?? '> 100'} rounds to 1%`);
    return { members, churnPer10Min, leavePerRound: leaveP, roundsTo1Percent: rounds };
  }));
  const consensusAt = (n: number, churn: number) => consensus.find((c) => c.members === n && c.churnPer10Min === churn)?.roundsTo1Percent ?? null;
  const file = opts.out ?? join(repoRoot, 'bench', 'results', 'scale.json');
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify({
    benchmark: 'scale', machine: machineInfo(), quick: opts.quick,
    setup: { linkModel: 'every link 10 Mbit/s, 40 ms one way; ring allreduce 2(N−1) hops of 1/N of the model', model: 'mlp-fashion (814 KB)', H: 8, stepMs: 'lognormal, median 45 ms, sigma 0.25 between members and steps', churn: 'Poisson departures, each replaced after 1 s' },
    results,
    consensus: { groupSize: CONSENSUS_GROUP, definition: 'rounds of Moshpit averaging until max over members of ‖xᵢ − x̄‖ ≤ 1% of its value at the start (independent random 8-dim vectors, no local steps); departures before each round, replaced by joiners loading a random member\'s vector', results: consensus },
    summary: {
      /** Not measurable yet: a job is one ring of at most 256 members (the coordinator does not run groups). */
      round_p99_ratio_n10000: n10k && base16?.syncMs ? n10k.syncMs!.p99 / base16.syncMs.p99 : null,
      utilization_n10000: n10k?.utilization ?? null,
      /** Goal ≤ 2·log2(N / group) = 18.6 at N = 10,000 in groups of 16. */
      consensus_rounds_n10000: consensusAt(10_000, 0.05),
      sim_vs_real_error: null,
      sync_p99_ms_n16: base16?.syncMs?.p99 ?? null,
      utilization_n16: base16?.utilization ?? null,
    },
  }, null, 2)}\n`);
  console.log(`wrote ${file}`);
}
