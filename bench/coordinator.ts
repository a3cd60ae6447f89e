// `npm run bench -- coordinator`: how many simulated volunteers one server node holds while they
// heartbeat and pass round barriers, how long a barrier takes, and what a connection costs the server.
//
// Processes: the server node (bench/coordinator/server-process.ts: `startServer()` as
// server/src/main.ts runs it, on 127.0.0.1, a free port and a fresh data directory) and client
// processes (bench/coordinator/client.ts) holding up to `perProcess` socket.io-client connections
// each, all forked by this one. Volunteers are added in steps (500, 1000, 2000, 5000, 6400); each step
// creates jobs of `jobSize` members for the new volunteers (minWorkers = maxWorkers = jobSize, so a
// job's first round waits for all of them; localsgd, H = 1, targetSteps and checkpointEvery large, so
// jobs neither end nor ask for checkpoints), lets the clients join them, then measures `runs` windows.
// Every member of a job sits in one client process; jobs of earlier steps keep running meanwhile.
//
// Each volunteer "trains" for `trainMs` (uniform) after each commit, sends round:ready, "allreduces"
// for `allreduceMs` after round:begin, sends round:result, and heartbeats `status` every `heartbeatMs`.
//
// Definitions (also written into the JSON):
// - barrier latency (round_p50_ms / round_p99_ms): for every member of every round, the time from
//   the moment the LAST member of its job sent `round:ready` (the barrier is complete from then on) to
//   the moment that member received `round:begin`. Both stamps are taken in the client process that
//   holds the whole job (sub-ms epoch clock, shared by all processes on this machine). It is the
//   server's barrier work (parse + validate the last ready, the coordinator's check, begin, one emit
//   per member) plus loopback delivery and the time the client's event loop takes to get to the
//   message. Rounds re-formed after an abort are not sampled. Split per round into `server` (the
//   server's own begin time, read from `deadline − roundTimeoutMs`, 1 ms resolution, minus the last
//   ready) and `delivery` (first receipt minus that begin time), with client and server event-loop
//   delay beside them, so queueing on a starved client is visible as such.
// - memory per volunteer: (server RSS after a forced full GC at N volunteers − the same at 0
//   volunteers before any job) ÷ N, in KiB; heap-used and the RSS the server reports on /metrics
//   (during load, no forced GC) are reported beside it, as is the marginal cost between steps.
// - a step is held when every volunteer was admitted to its job, the server's
//   `tabfleet_volunteers_connected` equals N, and in every window no connection dropped, no job ended
//   and every job committed at least one round.
//
// Bounded: every wait has a time limit, the whole run a budget (it stops ramping and reports what it
// measured), and all processes are killed at the end, on failure too. Loopback only.
//
// For investigating (none is needed for a normal run): TABFLEET_BENCH_COORDINATOR_STEPS=500,2000
// (other steps), TABFLEET_BENCH_COORDINATOR_ROUND_ACKS=0 (volunteers send round:ready/round:result
// without asking for an ack), TABFLEET_BENCH_COORDINATOR_CPU_PROF=<dir> (V8 CPU profile of the server),
// TABFLEET_BENCH_COORDINATOR_HEAP_SNAPSHOTS=<dir> (server heap snapshot after each step),
// TABFLEET_BENCH_COORDINATOR_SERVER_NODE_ARGS / _SERVER_LOG (e.g. "--trace-gc" and where its output
// goes), TABFLEET_BENCH_COORDINATOR_SERVER_APP=<copy of server/src/app.ts> (measure a modified server).
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { LIMITS, ROUND_TIMING, type JobSpecInput } from '@tabfleet/protocol';
import { distribution, median, type Distribution } from './stats';
import { machineInfo } from './machine';
import type { AddResult, ClientBehaviour, FromClient, FromServer, ServerStats, ToClient, ToServer, WindowSamples } from './coordinator/messages';
import type { BenchOptions } from './run';

const repoRoot = resolve(import.meta.dirname, '..');

export interface CoordinatorBenchConfig {
  /** Volunteer counts to ramp through, ascending. */
  steps: number[];
  /** Members per job (the last job of a step may be smaller). */
  jobSize: number;
  /** Most connections one client process holds. */
  perProcess: number;
  /** Measurement windows per step (the `--runs`), and their length. */
  windows: number;
  windowMs: number;
  /** Rounds run this long after a step's volunteers are admitted before measuring. */
  settleMs: number;
  /** Stop ramping (and report) once this much time has passed. */
  budgetMs: number;
  behaviour: ClientBehaviour;
  goal: { volunteers: number; p99Ms: number; kbPerVolunteer: number };
}

export function coordinatorConfig(runs: number, quick: boolean): CoordinatorBenchConfig {
  const goal = { volunteers: 5000, p99Ms: 250, kbPerVolunteer: 20 };
  const fromEnv = process.env.TABFLEET_BENCH_COORDINATOR_STEPS?.split(',').map(Number).filter((n) => Number.isInteger(n) && n > 0);
  const ackRoundEvents = process.env.TABFLEET_BENCH_COORDINATOR_ROUND_ACKS !== '0';
  if (quick) {
    return {
      steps: fromEnv?.length ? fromEnv : [40, 80], jobSize: 20, perProcess: 40, windows: runs, windowMs: 1500, settleMs: 500, budgetMs: 45_000, goal,
      behaviour: { trainMs: [200, 400], allreduceMs: [5, 20], heartbeatMs: 1000, ackRoundEvents, connectConcurrency: 20, joinTimeoutMs: 10_000, rampTimeoutMs: 15_000 },
    };
  }
  return {
    steps: fromEnv?.length ? fromEnv : [500, 1000, 2000, 5000, 6400], jobSize: 100, perProcess: 1000, windows: runs, windowMs: 6000, settleMs: 4000, budgetMs: 8 * 60_000, goal,
    behaviour: { trainMs: [1000, 3000], allreduceMs: [20, 100], heartbeatMs: 5000, ackRoundEvents, connectConcurrency: 100, joinTimeoutMs: 30_000, rampTimeoutMs: 120_000 },
  };
}

// ---------- child processes ----------

const TSX = ['--import', 'tsx'];

/** A forked process with a typed IPC inbox; its output is kept (last lines) for error reports. */
class Child<In, Out extends { type: string }> {
  readonly proc: ChildProcess;
  private readonly inbox: Out[] = [];
  private readonly waiters: { type: string; resolve(m: Out): void; reject(e: Error): void }[] = [];
  private readonly tail: string[] = [];
  exited: string | null = null;

  /**
   * With `logFile`, output goes straight to that file: writes to a pipe are synchronous on Linux, so a
   * busy reader (this process) could otherwise stall a chatty child such as the server.
   */
  constructor(readonly name: string, script: string, args: string[], execArgv: string[], private readonly logFile?: string) {
    const fd = logFile ? openSync(logFile, 'a') : null;
    this.proc = fork(join(import.meta.dirname, 'coordinator', script), args, {
      cwd: repoRoot, execArgv: [...TSX, ...execArgv], stdio: ['ignore', fd ?? 'pipe', fd ?? 'pipe', 'ipc'],
    });
    if (fd !== null) closeSync(fd);
    const keep = (chunk: Buffer) => {
      for (const line of chunk.toString().split('\n')) if (line.trim()) this.tail.push(line);
      if (this.tail.length > 40) this.tail.splice(0, this.tail.length - 40);
    };
    this.proc.stdout?.on('data', keep);
    this.proc.stderr?.on('data', keep);
    this.proc.on('message', (m: Out) => {
      const i = this.waiters.findIndex((w) => w.type === m.type);
      if (i >= 0) this.waiters.splice(i, 1)[0].resolve(m);
      else if (m.type === 'fatal') this.fail(`${this.name}: ${(m as unknown as { message: string }).message}`);
      else this.inbox.push(m);
    });
    this.proc.on('exit', (code, signal) => this.fail(`${this.name} exited (code ${code}, signal ${signal})`));
    this.proc.on('error', (e) => this.fail(`${this.name}: ${e.message}`));
  }

  private fail(why: string): void {
    this.exited ??= why;
    for (const w of this.waiters.splice(0)) w.reject(new Error(`${why}\n${this.output()}`));
  }

  output(): string {
    let lines = this.tail;
    if (this.logFile) {
      try {
        lines = readFileSync(this.logFile, 'utf8').split('\n').filter((l) => l.trim()).slice(-40);
      } catch {
        lines = [];
      }
    }
    return lines.map((l) => `  | ${l}`).join('\n');
  }

  send(m: In): void {
    if (!this.exited) this.proc.send(m as object);
  }

  next<T extends Out['type']>(type: T, timeoutMs: number): Promise<Extract<Out, { type: T }>> {
    const i = this.inbox.findIndex((m) => m.type === type);
    if (i >= 0) return Promise.resolve(this.inbox.splice(i, 1)[0] as Extract<Out, { type: T }>);
    if (this.exited) return Promise.reject(new Error(`${this.exited}\n${this.output()}`));
    return new Promise((resolvePromise, reject) => {
      const timer = setTimeout(() => {
        const k = this.waiters.indexOf(w);
        if (k >= 0) this.waiters.splice(k, 1);
        reject(new Error(`${this.name}: no "${type}" within ${timeoutMs} ms\n${this.output()}`));
      }, timeoutMs);
      const w = {
        type,
        resolve: (m: Out) => {
          clearTimeout(timer);
          resolvePromise(m as Extract<Out, { type: T }>);
        },
        reject: (e: Error) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      this.waiters.push(w);
    });
  }

  kill(): void {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
  }

  /** Resolves once the process has exited (killing it after `graceMs`). */
  async stopped(graceMs: number): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    await new Promise<void>((r) => {
      const t = setTimeout(() => {
        this.kill();
        r();
      }, graceMs);
      this.proc.once('exit', () => {
        clearTimeout(t);
        r();
      });
    });
  }
}

type ServerChild = Child<ToServer, FromServer>;
type ClientChild = Child<ToClient, FromClient> & { load: number };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------- the server's HTTP side ----------

interface Scrape {
  volunteersConnected: number;
  rssBytes: number;
  heapUsedBytes: number;
}

async function scrape(url: string): Promise<Scrape> {
  const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(15_000) });
  if (!res.ok) throw new Error(`/metrics: HTTP ${res.status}`);
  const text = await res.text();
  const gauge = (name: string) => {
    const m = text.match(new RegExp(`^tabfleet_${name} (\\S+)$`, 'm'));
    if (!m) throw new Error(`/metrics has no tabfleet_${name}`);
    return Number(m[1]);
  };
  return { volunteersConnected: gauge('volunteers_connected'), rssBytes: gauge('process_resident_memory_bytes'), heapUsedBytes: gauge('process_heap_used_bytes') };
}

export function benchJobSpec(size: number, index: number): JobSpecInput {
  return {
    name: `coordinator bench ${index}`, preset: 'mlp-fashion', dataset: 'synthetic-blobs', strategy: 'localsgd', H: 1,
    hyperparameters: { lr: 0.1, batchSize: 32 }, minWorkers: size, maxWorkers: size,
    targetSteps: 10_000_000, checkpointEvery: 100_000,
  };
}

async function createJob(url: string, token: string, spec: JobSpecInput): Promise<string> {
  const res = await fetch(`${url}/api/jobs`, {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(spec), signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  if (res.status !== 201) throw new Error(`POST /api/jobs: ${res.status} ${text}`);
  return JSON.parse(text).job.id;
}

// ---------- the report ----------

interface RampPoint {
  atMs: number;
  /** null: /metrics did not answer within 15 s. */
  volunteersConnected: number | null;
  cpuPercent: number;
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  rssBytes: number;
}

function mergeReasons(samples: WindowSamples[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of samples) for (const [k, v] of Object.entries(s.disconnectReasons)) out[k] = (out[k] ?? 0) + v;
  return out;
}

interface WindowReport {
  ms: number;
  barrier: Distribution;
  barrierServer: Distribution;
  barrierJob: Distribution;
  delivery: Distribution;
  roundsBegun: number;
  roundsCommitted: number;
  roundsPerSec: number;
  roundsAborted: number;
  roundsReformed: number;
  heartbeatsSent: number;
  eventsSent: number;
  eventsPerSec: number;
  errors: number;
  disconnects: number;
  disconnectReasons: Record<string, number>;
  jobEnds: number;
  connected: number;
  jobsProgressing: number;
  /** CPU in % of one core; the server's memory and connection count from its /metrics (null: no answer within 15 s). */
  server: {
    cpuPercent: number;
    /** Server CPU time per event the volunteers sent (µs): its cost per unit of work, which CPU contention inflates far less than latency. */
    cpuUsPerEvent: number;
    loopDelayP50Ms: number; loopDelayP99Ms: number; loopDelayMaxMs: number; rssBytes: number | null; heapUsedBytes: number | null; volunteersConnected: number | null;
  };
  clients: { cpuPercent: number; loopDelayP99Ms: number; loopDelayMaxMs: number };
  /** Whole machine busy CPU (% of one core, so up to 100 × cores), and what of it was neither the server nor the clients. */
  machineCpuPercent: number | null;
  otherCpuPercent: number | null;
}

export interface StepReport {
  volunteers: number;
  jobs: number;
  clientProcesses: number;
  held: boolean;
  /** Why the step does not count as held (empty when it does). */
  problems: string[];
  errorSamples: string[];
  ramp: {
    added: number; ms: number; joinsPerSec: number; welcomeMs: Distribution; admitMs: Distribution;
    /** Rounds of the volunteers already there went on while the new ones joined. */
    barrier: Distribution; disconnects: number; disconnectReasons: Record<string, number>; errors: number; errorSamples: string[];
    timeline: RampPoint[];
  };
  serverLogTail?: string[];
  windows: WindowReport[];
  /** Median over windows of each window's percentile; `pooled` over every sample of the step. */
  barrier: { p50Ms: number; p99Ms: number; maxMs: number; pooled: Distribution; serverP50Ms: number; serverP99Ms: number; deliveryP50Ms: number; deliveryP99Ms: number; jobP99Ms: number };
  roundsPerSec: number;
  /** Offered load on the server during the windows (client → server events per second). */
  eventsPerSec: number;
  server: { cpuPercent: number; cpuUsPerEvent: number; loopDelayP99Ms: number };
  clients: { cpuPercent: number; loopDelayP99Ms: number };
  /** Machine CPU used by neither the server nor the clients (other work on this shared machine), % of one core. */
  otherCpuPercent: number | null;
  memory: {
    rssBytes: number;
    heapUsedBytes: number;
    heapTotalBytes: number;
    externalBytes: number;
    arrayBuffersBytes: number;
    /** (RSS after GC − baseline RSS after GC) ÷ volunteers, KiB. */
    kbPerVolunteer: number;
    heapKbPerVolunteer: number;
    /** Same, between this step and the previous one (null for the first). */
    marginalKbPerVolunteer: number | null;
    marginalHeapKbPerVolunteer: number | null;
    /** The server's own /metrics during the windows (median, no forced GC). */
    metricsRssBytes: number;
    metricsHeapUsedBytes: number;
    metricsKbPerVolunteer: number;
  };
}

const r2 = (x: number) => Math.round(x * 100) / 100;

const DEFINITIONS = {
  barrier_ms: 'Per member per round: the member received round:begin − the LAST member of its job sent round:ready (both stamped in the one client process holding the whole job, epoch clock with sub-ms resolution). Server barrier work + loopback delivery + the client event loop reaching the message. Re-formed rounds (after an abort) are not sampled. p50/p99 are nearest-rank per window; a step reports the median of its windows.',
  barrier_server_ms: "Per round: the server's begin time (round:begin deadline − ROUND_TIMING.roundTimeoutMs, server Date.now(), 1 ms resolution) − the job's last round:ready sent. The inbound half: socket + parse + zod + coordinator until it began the round. Can read up to 1 ms below 0 (the server's clock is in whole ms).",
  delivery_ms: "Per round: first member's receipt of round:begin − the server's begin time. The outbound half (emits to every member, loopback, client event loop).",
  barrier_job_ms: 'Per round: the LAST member of the job received round:begin − the last round:ready sent (the whole ring can start).',
  kb_per_volunteer: '(server RSS after a forced full GC at N volunteers − server RSS after a forced full GC with no volunteers and no jobs) ÷ N, in KiB (1024 bytes). Jobs (coordinators) created for those volunteers are included.',
  held: "Every volunteer of the step admitted; the server's tabfleet_volunteers_connected = N; in every window no disconnects, no job:end, every job committed ≥ 1 round.",
  max_volunteers: 'The largest step held.',
};

// ---------- the run ----------

export async function runCoordinatorBench(opts: BenchOptions): Promise<{ file: string; report: Record<string, unknown> }> {
  const cfg = coordinatorConfig(opts.runs, opts.quick);
  const file = opts.out ?? join(repoRoot, 'bench', 'results', opts.quick ? 'coordinator.quick.json' : 'coordinator.json');
  const t0 = Date.now();
  const deadline = t0 + cfg.budgetMs;
  const log = (line: string) => console.log(`[coordinator] ${line}`);
  log(`${opts.quick ? 'quick mode, ' : ''}steps ${cfg.steps.join(', ')}; ${cfg.jobSize} per job, ≤${cfg.perProcess} per client process; ${cfg.windows} × ${cfg.windowMs} ms windows per step; load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);

  const dataDir = mkdtempSync(join(os.tmpdir(), 'tabfleet-bench-coordinator-'));
  const token = randomBytes(16).toString('hex');
  const children: Child<unknown, { type: string }>[] = [];
  const killAll = () => {
    for (const c of children) c.kill();
  };
  process.once('exit', killAll);
  const steps: StepReport[] = [];
  let stopReason = 'all steps done';
  let failure: { volunteers: number; error: string } | null = null;
  try {
    // TABFLEET_BENCH_COORDINATOR_CPU_PROF=<dir>: a V8 CPU profile of the server, written when it exits.
    const profDir = process.env.TABFLEET_BENCH_COORDINATOR_CPU_PROF;
    // TABFLEET_BENCH_COORDINATOR_SERVER_NODE_ARGS="--trace-gc …": more node flags for the server, whose
    // output goes to TABFLEET_BENCH_COORDINATOR_SERVER_LOG (default: its data directory, deleted at the end).
    const serverArgs = (process.env.TABFLEET_BENCH_COORDINATOR_SERVER_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
    const serverLog = process.env.TABFLEET_BENCH_COORDINATOR_SERVER_LOG ? resolve(process.env.TABFLEET_BENCH_COORDINATOR_SERVER_LOG) : join(dataDir, 'server.log');
    // TABFLEET_BENCH_COORDINATOR_HEAP_SNAPSHOTS=<dir>: a heap snapshot of the server after each step's GC.
    const snapshotDir = process.env.TABFLEET_BENCH_COORDINATOR_HEAP_SNAPSHOTS;
    if (snapshotDir) mkdirSync(snapshotDir, { recursive: true });
    const server: ServerChild = new Child<ToServer, FromServer>('server', 'server-process.ts', [dataDir, token], ['--expose-gc', ...(profDir ? ['--cpu-prof', `--cpu-prof-dir=${resolve(profDir)}`] : []), ...serverArgs], serverLog);
    children.push(server as Child<unknown, { type: string }>);
    const ready = await server.next('ready', 60_000);
    const url = ready.url;
    log(`server pid ${ready.pid} at ${url}`);
    // Let start-up garbage go before the baseline (RSS after GC with no volunteers and no jobs).
    await sleep(2000);
    server.send({ type: 'stats', gc: true });
    await server.next('stats', 30_000);
    await sleep(500);
    server.send({ type: 'stats', gc: true });
    const baseline = await server.next('stats', 30_000);
    log(`baseline: RSS ${(baseline.rssBytes / 2 ** 20).toFixed(1)} MiB, heap ${(baseline.heapUsedBytes / 2 ** 20).toFixed(1)} MiB`);

    const clients: ClientChild[] = [];
    const newClient = async () => {
      const c = Object.assign(new Child<ToClient, FromClient>(`client ${clients.length + 1}`, 'client.ts', [JSON.stringify(cfg.behaviour)], []), { load: 0 });
      children.push(c as unknown as Child<unknown, { type: string }>);
      clients.push(c);
      await c.next('started', 60_000);
      return c;
    };
    let volunteers = 0;
    let jobCount = 0;
    let previous: { n: number; rss: number; heap: number } = { n: 0, rss: baseline.rssBytes, heap: baseline.heapUsedBytes };

    for (const target of cfg.steps) {
      if (target <= volunteers) continue;
      // The windows of a step take a known time; the ramp gets what is left of the budget.
      const windowsMs = cfg.settleMs + cfg.windows * (cfg.windowMs + 1000);
      const rampTimeoutMs = Math.min(cfg.behaviour.rampTimeoutMs, deadline - Date.now() - windowsMs);
      if (rampTimeoutMs < 10_000) {
        stopReason = `time budget of ${cfg.budgetMs} ms used up before the ${target} step`;
        break;
      }
      const adding = target - volunteers;
      const newJobs = Math.ceil(adding / cfg.jobSize);
      if (jobCount + newJobs > LIMITS.maxActiveJobs) {
        stopReason = `${target} volunteers need ${jobCount + newJobs} jobs of ≤${cfg.jobSize}; the server allows ${LIMITS.maxActiveJobs}`;
        break;
      }
      const runStep = async (): Promise<boolean> => {
        log(`step ${target}: creating ${newJobs} jobs for ${adding} more volunteers`);
        // Even job sizes, whole jobs per client process.
        const plan = new Map<ClientChild, { jobId: string; count: number }[]>();
        for (let i = 0; i < newJobs; i++) {
          const size = Math.floor(adding / newJobs) + (i < adding % newJobs ? 1 : 0);
          const jobId = await createJob(url, token, benchJobSpec(size, jobCount + i));
          let c = clients.find((x) => x.load + size <= cfg.perProcess);
          if (!c) c = await newClient();
          c.load += size;
          plan.set(c, [...(plan.get(c) ?? []), { jobId, count: size }]);
        }
        jobCount += newJobs;
        const rampStart = Date.now();
        for (const c of clients) c.send({ type: 'window' });
        for (const [c, jobs] of plan) c.send({ type: 'add', url, jobs, rampTimeoutMs });
        // While they join: the server's load and connection count every 2 s.
        const timeline: RampPoint[] = [];
        let ramping = true;
        const poll = (async () => {
          server.send({ type: 'stats', gc: false });
          await server.next('stats', 30_000);
          while (ramping) {
            await sleep(2000);
            server.send({ type: 'stats', gc: false });
            const st = await server.next('stats', 30_000);
            // A server too busy to answer /metrics in time is a data point, not a failure of the run.
            const m = await scrape(url).catch(() => null);
            timeline.push({
              atMs: Date.now() - rampStart, volunteersConnected: m?.volunteersConnected ?? null, cpuPercent: r2((100 * st.cpuMs) / st.wallMs),
              loopDelayP99Ms: r2(st.loopDelayP99Ms), loopDelayMaxMs: r2(st.loopDelayMaxMs), rssBytes: st.rssBytes,
            });
          }
        })();
        poll.catch(() => {}); // awaited below; this only keeps an early failure from being unhandled
        let added: AddResult[];
        try {
          added = await Promise.all([...plan.keys()].map((c) => c.next('added', rampTimeoutMs + cfg.behaviour.joinTimeoutMs + 15_000)));
        } finally {
          ramping = false;
          await poll.catch(() => {});
        }
        const rampMs = Date.now() - rampStart;
        for (const c of clients) c.send({ type: 'collect' });
        const rampSamples = (await Promise.all(clients.map((c) => c.next('samples', 30_000)))) as WindowSamples[];
        volunteers = target;
        const admitted = added.reduce((s, a) => s + a.admitted, 0);
        const problems: string[] = [];
        if (admitted < adding) problems.push(`${adding - admitted} of ${adding} new volunteers not admitted: ${added.flatMap((a) => a.failures).slice(0, 3).join('; ')}`);
        const rampDrops = rampSamples.reduce((a, x) => a + x.disconnects, 0);
        const worstLoop = timeline.reduce((m, p) => Math.max(m, p.loopDelayMaxMs), 0);
        log(`  ${admitted}/${adding} admitted in ${rampMs} ms (${((admitted * 1000) / rampMs).toFixed(0)}/s); ${rampDrops} disconnects${rampDrops ? ` ${JSON.stringify(mergeReasons(rampSamples))}` : ''}; server loop delay max ${worstLoop.toFixed(0)} ms; settling ${cfg.settleMs} ms`);
        await sleep(cfg.settleMs);

        const windows: WindowReport[] = [];
        const errorSamples: string[] = [];
        const pooledBarrierMs: number[] = [];
        for (let w = 0; w < cfg.windows; w++) {
          server.send({ type: 'stats', gc: false });
          await server.next('stats', 30_000); // resets the server's CPU and loop-delay counters
          for (const c of clients) c.send({ type: 'window' });
          const cpu0 = systemCpu();
          // Memory as the server itself reports it, mid-window.
          await sleep(cfg.windowMs / 2);
          const metrics = await scrape(url).catch(() => null);
          await sleep(cfg.windowMs / 2);
          for (const c of clients) c.send({ type: 'collect' });
          const samples = (await Promise.all(clients.map((c) => c.next('samples', 30_000)))) as WindowSamples[];
          server.send({ type: 'stats', gc: false });
          const st = await server.next('stats', 30_000);
          windows.push(windowReport(samples, st, metrics, systemCpu(), cpu0));
          for (const s of samples) {
            errorSamples.push(...s.errorSamples);
            for (const x of s.barrierMs) pooledBarrierMs.push(x);
          }
          const wr = windows[windows.length - 1];
          log(`  window ${w + 1}: barrier p50 ${wr.barrier.p50} p99 ${wr.barrier.p99} ms (server part p99 ${wr.barrierServer.p99}, delivery p99 ${wr.delivery.p99}); ${wr.roundsPerSec.toFixed(1)} rounds/s; server CPU ${wr.server.cpuPercent.toFixed(0)}% (${wr.server.cpuUsPerEvent.toFixed(0)} µs/event), loop p99 ${wr.server.loopDelayP99Ms.toFixed(1)} ms; clients CPU ${wr.clients.cpuPercent.toFixed(0)}%, loop p99 ${wr.clients.loopDelayP99Ms.toFixed(1)} ms; other work CPU ${wr.otherCpuPercent?.toFixed(0) ?? '?'}%; errors ${wr.errors}`);
        }
        server.send({ type: 'stats', gc: true });
        const mem = await server.next('stats', 60_000);
        if (snapshotDir) {
          server.send({ type: 'snapshot', file: join(resolve(snapshotDir), `server-${target}.heapsnapshot`) });
          log(`  heap snapshot ${(await server.next('snapshot', 120_000)).file}`);
        }
        const step = stepReport(target, jobCount, clients.length, added, rampMs, timeline, rampSamples, windows, mem, baseline, previous, problems, errorSamples.slice(0, 10), pooledBarrierMs);
        if (!step.held) step.serverLogTail = server.output().split('\n').slice(-20);
        steps.push(step);
        previous = { n: target, rss: mem.rssBytes, heap: mem.heapUsedBytes };
        log(`  ${step.held ? 'held' : 'NOT held'}: barrier p50 ${step.barrier.p50Ms} p99 ${step.barrier.p99Ms} ms; ${step.memory.kbPerVolunteer} KiB/volunteer (RSS after GC), heap ${step.memory.heapKbPerVolunteer} KiB${step.problems.length ? `; ${step.problems.join('; ')}` : ''}`);
        if (!step.held) {
          stopReason = `the ${target} step was not held: ${step.problems.join('; ')}`;
          return false;
        }
        return true;
      };
      try {
        if (!(await runStep())) break;
      } catch (e) {
        const message = (e as Error).message;
        stopReason = `the ${target} step failed: ${message.split('\n')[0]}`;
        failure = { volunteers: target, error: message.slice(0, 4000) };
        log(`  ${stopReason}`);
        break;
      }
    }

    const report = {
      benchmark: 'coordinator',
      quick: opts.quick,
      date: new Date().toISOString(),
      durationMs: Date.now() - t0,
      stopReason,
      /** A step that broke off with an error (its figures are not in `steps`). */
      failure,
      options: { runs: opts.runs, ...cfg, roundTimeoutMs: ROUND_TIMING.roundTimeoutMs, jobSpec: benchJobSpec(cfg.jobSize, 0) },
      machine: {
        ...machineInfo(),
        note: 'The server, every client process and this orchestrator share these cores (and the machine is shared with other work), so client CPU competes with the server: see each window\'s server/clients CPU and event-loop delay.',
      },
      definitions: DEFINITIONS,
      server: { baseline: { rssBytes: baseline.rssBytes, heapUsedBytes: baseline.heapUsedBytes, heapTotalBytes: baseline.heapTotalBytes, externalBytes: baseline.externalBytes } },
      steps,
      summary: summarize(steps, cfg),
    };
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
    const s = report.summary;
    log(`summary: max_volunteers ${s.max_volunteers}, round_p99_ms ${s.round_p99_ms}, round_p50_ms ${s.round_p50_ms}, kb_per_volunteer ${s.kb_per_volunteer} (goal ${cfg.goal.volunteers}, <${cfg.goal.p99Ms} ms, <${cfg.goal.kbPerVolunteer} KiB)`);
    log(`wrote ${relative(process.cwd(), file) || file}`);

    // Stop: server first (no disconnect storm to process), then the clients.
    server.send({ type: 'exit' });
    await server.stopped(5_000);
    for (const c of clients) c.send({ type: 'stop' });
    await Promise.all(clients.map((c) => c.stopped(5_000)));
    return { file, report };
  } finally {
    killAll();
    process.removeListener('exit', killAll);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Busy and total jiffies of all CPUs since boot (Linux /proc/stat), or null elsewhere. */
function systemCpu(): { busy: number; total: number } | null {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const idle = f[3] + (f[4] ?? 0);
    const total = f.reduce((a, b) => a + b, 0);
    return { busy: total - idle, total };
  } catch {
    return null;
  }
}

function windowReport(samples: WindowSamples[], st: ServerStats, metrics: Scrape | null, cpu1: ReturnType<typeof systemCpu>, cpu0: ReturnType<typeof systemCpu>): WindowReport {
  const all = <K extends keyof WindowSamples>(k: K) => samples.flatMap((s) => s[k] as number[]);
  const sum = (k: keyof WindowSamples) => samples.reduce((a, s) => a + (s[k] as number), 0);
  const ms = median(samples.map((s) => s.windowMs));
  const serverCpu = r2((100 * st.cpuMs) / st.wallMs);
  const clientCpu = r2((100 * samples.reduce((a, s) => a + s.cpuMs, 0)) / ms);
  const cores = os.cpus().length;
  const machine = cpu0 && cpu1 && cpu1.total > cpu0.total ? r2((100 * cores * (cpu1.busy - cpu0.busy)) / (cpu1.total - cpu0.total)) : null;
  return {
    ms: r2(ms),
    barrier: distribution(all('barrierMs')),
    barrierServer: distribution(all('barrierServerMs')),
    barrierJob: distribution(all('barrierJobMs')),
    delivery: distribution(all('deliveryMs')),
    roundsBegun: sum('roundsBegun'),
    roundsCommitted: sum('roundsCommitted'),
    roundsPerSec: r2((sum('roundsCommitted') * 1000) / ms),
    roundsAborted: sum('roundsAborted'),
    roundsReformed: sum('roundsReformed'),
    heartbeatsSent: sum('heartbeatsSent'),
    eventsSent: sum('eventsSent'),
    eventsPerSec: r2((sum('eventsSent') * 1000) / ms),
    errors: sum('errors'),
    disconnects: sum('disconnects'),
    disconnectReasons: mergeReasons(samples),
    jobEnds: sum('jobEnds'),
    connected: sum('connected'),
    jobsProgressing: sum('jobsProgressing'),
    server: {
      cpuPercent: serverCpu, cpuUsPerEvent: r2((1000 * st.cpuMs) / Math.max(1, sum('eventsSent'))), loopDelayP50Ms: r2(st.loopDelayP50Ms), loopDelayP99Ms: r2(st.loopDelayP99Ms), loopDelayMaxMs: r2(st.loopDelayMaxMs),
      rssBytes: metrics?.rssBytes ?? null, heapUsedBytes: metrics?.heapUsedBytes ?? null, volunteersConnected: metrics?.volunteersConnected ?? null,
    },
    clients: {
      cpuPercent: clientCpu,
      loopDelayP99Ms: r2(Math.max(...samples.map((s) => s.loopDelayP99Ms))),
      loopDelayMaxMs: r2(Math.max(...samples.map((s) => s.loopDelayMaxMs))),
    },
    machineCpuPercent: machine,
    otherCpuPercent: machine === null ? null : r2(Math.max(0, machine - serverCpu - clientCpu)),
  };
}

function stepReport(
  n: number, jobs: number, clientProcesses: number, added: AddResult[], rampMs: number, timeline: RampPoint[], rampSamples: WindowSamples[], windows: WindowReport[], mem: ServerStats, baseline: ServerStats,
  previous: { n: number; rss: number; heap: number }, problems: string[], errorSamples: string[], pooledBarrierMs: number[],
): StepReport {
  const med = (f: (w: WindowReport) => number) => r2(median(windows.map(f)));
  for (const [i, w] of windows.entries()) {
    const where = `window ${i + 1}`;
    if (w.server.volunteersConnected === null) problems.push(`${where}: the server did not answer /metrics within 15 s`);
    else if (w.server.volunteersConnected !== n) problems.push(`${where}: server reports ${w.server.volunteersConnected} volunteers connected, not ${n}`);
    if (w.disconnects) problems.push(`${where}: ${w.disconnects} disconnects`);
    if (w.jobEnds) problems.push(`${where}: ${w.jobEnds} job:end`);
    if (w.jobsProgressing < jobs) problems.push(`${where}: ${jobs - w.jobsProgressing} of ${jobs} jobs committed no round`);
    if (w.barrier.count === 0) problems.push(`${where}: no barrier samples`);
  }
  const admitted = added.reduce((s, a) => s + a.admitted, 0);
  const rampDisconnects = rampSamples.reduce((a, x) => a + x.disconnects, 0);
  if (rampDisconnects) problems.unshift(`${rampDisconnects} disconnects while volunteers joined: ${JSON.stringify(mergeReasons(rampSamples))}`);
  const kib = (bytes: number, count: number) => r2(bytes / 1024 / count);
  const metricsRss = median(windows.flatMap((w) => (w.server.rssBytes === null ? [] : [w.server.rssBytes])));
  return {
    volunteers: n, jobs, clientProcesses, held: problems.length === 0, problems, errorSamples,
    ramp: {
      added: admitted, ms: rampMs, joinsPerSec: r2((admitted * 1000) / rampMs),
      welcomeMs: distribution(added.flatMap((a) => a.welcomeMs)), admitMs: distribution(added.flatMap((a) => a.admitMs)),
      barrier: distribution(rampSamples.flatMap((x) => x.barrierMs)),
      disconnects: rampSamples.reduce((a, x) => a + x.disconnects, 0), disconnectReasons: mergeReasons(rampSamples),
      errors: rampSamples.reduce((a, x) => a + x.errors, 0), errorSamples: rampSamples.flatMap((x) => x.errorSamples).slice(0, 10),
      timeline,
    },
    windows,
    barrier: {
      p50Ms: med((w) => w.barrier.p50), p99Ms: med((w) => w.barrier.p99), maxMs: r2(Math.max(...windows.map((w) => w.barrier.max))),
      pooled: distribution(pooledBarrierMs),
      serverP50Ms: med((w) => w.barrierServer.p50), serverP99Ms: med((w) => w.barrierServer.p99),
      deliveryP50Ms: med((w) => w.delivery.p50), deliveryP99Ms: med((w) => w.delivery.p99), jobP99Ms: med((w) => w.barrierJob.p99),
    },
    roundsPerSec: med((w) => w.roundsPerSec),
    eventsPerSec: med((w) => w.eventsPerSec),
    server: { cpuPercent: med((w) => w.server.cpuPercent), cpuUsPerEvent: med((w) => w.server.cpuUsPerEvent), loopDelayP99Ms: med((w) => w.server.loopDelayP99Ms) },
    clients: { cpuPercent: med((w) => w.clients.cpuPercent), loopDelayP99Ms: med((w) => w.clients.loopDelayP99Ms) },
    otherCpuPercent: windows.some((w) => w.otherCpuPercent === null) ? null : med((w) => w.otherCpuPercent!),
    memory: {
      rssBytes: mem.rssBytes, heapUsedBytes: mem.heapUsedBytes, heapTotalBytes: mem.heapTotalBytes, externalBytes: mem.externalBytes, arrayBuffersBytes: mem.arrayBuffersBytes,
      kbPerVolunteer: kib(mem.rssBytes - baseline.rssBytes, n),
      heapKbPerVolunteer: kib(mem.heapUsedBytes - baseline.heapUsedBytes, n),
      marginalKbPerVolunteer: previous.n ? kib(mem.rssBytes - previous.rss, n - previous.n) : null,
      marginalHeapKbPerVolunteer: previous.n ? kib(mem.heapUsedBytes - previous.heap, n - previous.n) : null,
      metricsRssBytes: metricsRss,
      metricsHeapUsedBytes: median(windows.flatMap((w) => (w.server.heapUsedBytes === null ? [] : [w.server.heapUsedBytes]))),
      metricsKbPerVolunteer: kib(metricsRss - baseline.rssBytes, n),
    },
  };
}

function summarize(steps: StepReport[], cfg: CoordinatorBenchConfig) {
  const held = steps.filter((s) => s.held);
  const top = held[held.length - 1];
  const atGoal = steps.find((s) => s.volunteers === cfg.goal.volunteers);
  return {
    /** Largest step held (0 when none). */
    max_volunteers: top?.volunteers ?? 0,
    /** Barrier latency at that step: median over windows of each window's p99 / p50. */
    round_p99_ms: top?.barrier.p99Ms ?? null,
    round_p50_ms: top?.barrier.p50Ms ?? null,
    /** Server RSS per volunteer at that step (after GC, baseline subtracted), KiB. */
    kb_per_volunteer: top?.memory.kbPerVolunteer ?? null,
    heap_kb_per_volunteer: top?.memory.heapKbPerVolunteer ?? null,
    server_cpu_percent: top?.server.cpuPercent ?? null,
    rounds_per_sec: top?.roundsPerSec ?? null,
    goal: cfg.goal,
    /** The figures at the goal's volunteer count, when that step ran. */
    at_goal: atGoal ? { volunteers: atGoal.volunteers, held: atGoal.held, round_p99_ms: atGoal.barrier.p99Ms, kb_per_volunteer: atGoal.memory.kbPerVolunteer } : null,
    meets_goal: {
      volunteers: (top?.volunteers ?? 0) >= cfg.goal.volunteers,
      round_p99: atGoal ? atGoal.held && atGoal.barrier.p99Ms < cfg.goal.p99Ms : false,
      kb_per_volunteer: atGoal ? atGoal.memory.kbPerVolunteer < cfg.goal.kbPerVolunteer : false,
    },
  };
}

export async function run(opts: BenchOptions): Promise<void> {
  await runCoordinatorBench(opts);
}
