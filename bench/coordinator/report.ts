// The coordinator benchmark's report: per-window figures from the clients' samples and the server's
// stats, per-step figures and whether the step was held, the summary, and the definitions written
// into the JSON.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { distribution, median, type Distribution } from '../stats';
import type { CoordinatorBenchConfig } from './config';
import type { Scrape } from './http';
import type { AddResult, ServerStats, WindowSamples } from './messages';

export interface RampPoint {
  atMs: number;
  /** null: /metrics did not answer within 15 s. */
  volunteersConnected: number | null;
  cpuPercent: number;
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  rssBytes: number;
}

export function mergeReasons(samples: WindowSamples[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of samples) for (const [k, v] of Object.entries(s.disconnectReasons)) out[k] = (out[k] ?? 0) + v;
  return out;
}

export interface WindowReport {
  ms: number;
  barrier: Distribution;
  barrierServer: Distribution;
  barrierJob: Distribution;
  delivery: Distribution;
  commit: Distribution;
  round: Distribution;
  roundsBegun: number;
  roundsCommitted: number;
  roundsPerSec: number;
  roundsAborted: number;
  roundsReformed: number;
  heartbeatsSent: number;
  signalsSent: number;
  signalsReceived: number;
  checkpointsUploaded: number;
  checkpointsFetched: number;
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
    /** CPU in % of one core, summed over the nodes and, with several, the redis-server (its own share in redisCpuPercent). */
    cpuPercent: number;
    redisCpuPercent: number | null;
    /** Server CPU time per event the volunteers sent (µs): its cost per unit of work, which CPU contention inflates far less than latency. */
    cpuUsPerEvent: number;
    loopDelayP50Ms: number; loopDelayP99Ms: number; loopDelayMaxMs: number; rssBytes: number | null; heapUsedBytes: number | null; volunteersConnected: number | null;
    /** The garbage collector's pauses in the window (summed over the nodes; the longest on any), and its major collections. */
    gcPauseMs: number; gcMaxPauseMs: number; gcMajor: number;
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
  /**
   * The round as a member sees it, each over every sample of every window of the step (pooled):
   * `begin` last round:ready → round:begin, `commit` last round:result → round:commit, `whole` the two
   * added per member and round.
   */
  round: { begin: Distribution; commit: Distribution; whole: Distribution };
  /** The begin half split into its parts, pooled over the step's windows (per round, not per member). */
  barrier: { server: Distribution; delivery: Distribution; job: Distribution };
  /** Signals and checkpoints of every client process since it started, at the end of the step. */
  volunteerTotals: WindowSamples['totals'];
  /** The whole round's pooled p99 is under the goal's (CoordinatorBenchConfig.goal.p99Ms). */
  underGoal: boolean;
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
    /**
     * Several nodes: kbPerVolunteer of the server nodes alone, and the redis-server's RSS (in the sums
     * above). Redis keeps every round's record and metric point, history that grows with the run's
     * length rather than with the volunteers, so it is shown apart.
     */
    nodesKbPerVolunteer?: number;
    redisRssBytes?: number;
  };
}

export const r2 = (x: number) => Math.round(x * 100) / 100;

export const DEFINITIONS = {
  begin_ms:
    'The begin half of a round, per member per round: the member received round:begin − the LAST member of its job sent round:ready (both stamped ' +
    'in the one client process holding the whole job, epoch clock with sub-ms resolution). Server barrier work (and, after a checkpointing round, ' +
    'the wait for the upload to be stored) + loopback delivery + the client event loop reaching the message. Re-formed rounds (after an abort) ' +
    'are not sampled.',
  commit_ms: 'The commit half of a round, per member per round: the member received round:commit − the LAST member of its job sent round:result (same clock and process as begin_ms).',
  round_ms:
    "The whole round as a member waits on the server, per member per round with both halves sampled: begin_ms + commit_ms. The members' own " +
    "training (trainMs) and collective (WebRTC signaling with new neighbours through the server, then allreduceMs) are not in it.",
  percentiles: 'Nearest rank over every sample of the step (all windows pooled), not a median of per-window figures; windows[] keep their own distributions.',
  barrier_server_ms:
    "Per round: the server's begin time (round:begin `began`, server Date.now(), 1 ms resolution) − the job's last round:ready sent. The inbound " +
    "part of begin_ms: socket + parse + zod + coordinator until it began the round. Can read up to 1 ms below 0 (the server's clock is in whole " +
    "ms).",
  delivery_ms: "Per round: first member's receipt of round:begin − the server's begin time. The outbound part of begin_ms (emits to every member, loopback, client event loop).",
  barrier_job_ms: 'Per round: the LAST member of the job received round:begin − the last round:ready sent (the whole ring can start).',
  volunteers:
    "Simulated: a real socket.io-client connection each; on model:load with a URL they download the checkpoint over HTTP; ring members signal new " +
    "neighbours through the server as packages/collective/src/webrtc.ts does (offer + candidate, answer + candidate, links kept across rounds); " +
    "the job checkpoints at its default checkpointEvery and the round's uploader uploads the model's real size (mlp-fashion, f32); each sends the " +
    "worker table's status heartbeat at the period its server names (welcome, then heartbeat events: 2 s, doubled for each doubling of the node's " +
    'volunteers past 1,000 heartbeats a second; protocol heartbeat.ts) with an ack when behaviour.heartbeatAck, as a tab\'s runtime does (no ack).',
  gc_pause_ms:
    "Each window's server.gcPauseMs, gcMaxPauseMs, gcMajor: the server process's garbage-collection pauses in the window (Node's 'gc' " +
    'performance entries: their durations summed, the longest, and how many were major collections); with several nodes summed, the longest of any.',
  client_nice:
    "options.clientNice: the client processes' niceness (the server nodes, the redis-server and this orchestrator run at 0). The clients stand " +
    "for volunteers on other machines; at equal priority they took the server's CPU whenever both were busy. Their own delays (a niced client " +
    'reads its messages later) stay in round_ms. TABFLEET_BENCH_COORDINATOR_CLIENT_NICE=0 measures without it.',
  kb_per_volunteer:
    '(server RSS after a forced full GC at N volunteers − server RSS after a forced full GC with no volunteers and no jobs) ÷ N, in KiB (1024 ' +
    'bytes). Jobs (coordinators) created for those volunteers are included.',
  held: "Every volunteer of the step admitted; the server's tabfleet_volunteers_connected = N; in every window no disconnects, no job:end, every job committed ≥ 1 round.",
  max_volunteers: "The largest step held whose round_ms p99 (pooled over the step) is under goal.p99Ms.",
  max_volunteers_two_nodes:
    "max_volunteers of twoNodes: two server nodes started as main.ts --redis runs them, sharing one real redis-server (store, job leases, the " +
    "Socket.IO Redis adapter). Each job is created on the nodes in turn and so owned by its node; its members connect to that node. Held, " +
    "volunteers connected (summed over the nodes) and round_ms as for one node; kb_per_volunteer there counts both nodes' RSS and the " +
    "redis-server's; nodes_kb_per_volunteer the nodes' alone (redis-server keeps every round record and metric point, history that grows " +
    "with the run's length), redis_rss_mib the redis-server's RSS.",
  stop_over_goal:
    'A phase stops ramping after a step held whose pooled whole-round p99 is over options.stopOverGoalFactor × goal.p99Ms (stopReason says so): ' +
    'larger steps could not count, and the bench\'s time goes to the next phase.',
};

/** Busy and total jiffies of all CPUs since boot (Linux /proc/stat), or null elsewhere. */
export function systemCpu(): { busy: number; total: number } | null {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const idle = f[3] + (f[4] ?? 0);
    const total = f.reduce((a, b) => a + b, 0);
    return { busy: total - idle, total };
  } catch {
    return null;
  }
}

export function windowReport(samples: WindowSamples[], st: ServerStats, metrics: Scrape | null, cpu1: ReturnType<typeof systemCpu>, cpu0: ReturnType<typeof systemCpu>): WindowReport {
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
    commit: distribution(all('commitMs')),
    round: distribution(all('roundMs')),
    roundsBegun: sum('roundsBegun'),
    roundsCommitted: sum('roundsCommitted'),
    roundsPerSec: r2((sum('roundsCommitted') * 1000) / ms),
    roundsAborted: sum('roundsAborted'),
    roundsReformed: sum('roundsReformed'),
    heartbeatsSent: sum('heartbeatsSent'),
    signalsSent: sum('signalsSent'),
    signalsReceived: sum('signalsReceived'),
    checkpointsUploaded: sum('checkpointsUploaded'),
    checkpointsFetched: sum('checkpointsFetched'),
    eventsSent: sum('eventsSent'),
    eventsPerSec: r2((sum('eventsSent') * 1000) / ms),
    errors: sum('errors'),
    disconnects: sum('disconnects'),
    disconnectReasons: mergeReasons(samples),
    jobEnds: sum('jobEnds'),
    connected: sum('connected'),
    jobsProgressing: sum('jobsProgressing'),
    server: {
      redisCpuPercent: st.redis ? r2((100 * st.redis.cpuMs) / st.wallMs) : null,
      cpuPercent: serverCpu, cpuUsPerEvent: r2((1000 * st.cpuMs) / Math.max(1, sum('eventsSent'))),
      loopDelayP50Ms: r2(st.loopDelayP50Ms), loopDelayP99Ms: r2(st.loopDelayP99Ms), loopDelayMaxMs: r2(st.loopDelayMaxMs),
      gcPauseMs: r2(st.gcPauseMs), gcMaxPauseMs: r2(st.gcMaxPauseMs), gcMajor: st.gcMajor,
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

export function stepReport(
  n: number, jobs: number, clientProcesses: number, added: AddResult[], rampMs: number, timeline: RampPoint[], rampSamples: WindowSamples[], windows: WindowReport[],
  mem: ServerStats, baseline: ServerStats,
  previous: { n: number; rss: number; heap: number }, problems: string[], errorSamples: string[], pooled: WindowSamples[], goalP99Ms: number,
): StepReport {
  const all = (k: 'barrierMs' | 'commitMs' | 'roundMs' | 'barrierServerMs' | 'deliveryMs' | 'barrierJobMs') => distribution(pooled.flatMap((s) => s[k]));
  const whole = all('roundMs');
  const med = (f: (w: WindowReport) => number) => r2(median(windows.map(f)));
  for (const [i, w] of windows.entries()) {
    const where = `window ${i + 1}`;
    if (w.server.volunteersConnected === null) problems.push(`${where}: the server did not answer /metrics within 15 s`);
    else if (w.server.volunteersConnected !== n) problems.push(`${where}: server reports ${w.server.volunteersConnected} volunteers connected, not ${n}`);
    if (w.disconnects) problems.push(`${where}: ${w.disconnects} disconnects`);
    if (w.jobEnds) problems.push(`${where}: ${w.jobEnds} job:end`);
    if (w.jobsProgressing < jobs) problems.push(`${where}: ${jobs - w.jobsProgressing} of ${jobs} jobs committed no round`);
    if (w.barrier.count === 0) problems.push(`${where}: no barrier samples`);
    if (w.round.count === 0) problems.push(`${where}: no whole-round samples`);
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
    round: { begin: all('barrierMs'), commit: all('commitMs'), whole },
    barrier: { server: all('barrierServerMs'), delivery: all('deliveryMs'), job: all('barrierJobMs') },
    underGoal: whole.count > 0 && whole.p99 < goalP99Ms,
    volunteerTotals: (['signalsSent', 'signalsReceived', 'checkpointsUploaded', 'checkpointsFetched'] as const).reduce(
      (t, k) => ({ ...t, [k]: pooled.slice(-clientProcesses).reduce((a, x) => a + x.totals[k], 0) }),
      { signalsSent: 0, signalsReceived: 0, checkpointsUploaded: 0, checkpointsFetched: 0 },
    ),
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
      ...(mem.redis && baseline.redis ? {
        nodesKbPerVolunteer: kib(mem.rssBytes - mem.redis.rssBytes - (baseline.rssBytes - baseline.redis.rssBytes), n),
        redisRssBytes: mem.redis.rssBytes,
      } : {}),
    },
  };
}

export function summarize(steps: StepReport[], cfg: CoordinatorBenchConfig, twoNodeSteps: StepReport[]) {
  const passing = steps.filter((s) => s.held && s.underGoal);
  const top = passing[passing.length - 1];
  const largestHeld = steps.filter((s) => s.held).at(-1);
  const atGoal = steps.find((s) => s.volunteers === cfg.goal.volunteers);
  const two = twoNodeSummary(twoNodeSteps, cfg);
  return {
    /** Largest step held whose whole round's pooled p99 is under goal.p99Ms (0 when none). */
    max_volunteers: top?.volunteers ?? 0,
    /** The largest step held at all, whatever its round times. */
    max_volunteers_held: largestHeld?.volunteers ?? 0,
    /** At max_volunteers: the whole round (begin half + commit half), pooled over every sample of the step. */
    round_p99_ms: top?.round.whole.p99 ?? null,
    round_p50_ms: top?.round.whole.p50 ?? null,
    /** The two halves at that step, pooled the same way. */
    begin_p99_ms: top?.round.begin.p99 ?? null,
    commit_p99_ms: top?.round.commit.p99 ?? null,
    /** Server RSS per volunteer at that step (after GC, baseline subtracted), KiB. */
    kb_per_volunteer: top?.memory.kbPerVolunteer ?? null,
    heap_kb_per_volunteer: top?.memory.heapKbPerVolunteer ?? null,
    server_cpu_percent: top?.server.cpuPercent ?? null,
    rounds_per_sec: top?.roundsPerSec ?? null,
    /** The same figure on two server nodes sharing a redis-server (twoNodes.steps). */
    max_volunteers_two_nodes: two.max_volunteers,
    two_nodes_round_p99_ms: two.round_p99_ms,
    two_nodes_kb_per_volunteer: two.kb_per_volunteer,
    goal: cfg.goal,
    /** The figures at the goal's volunteer count, when that step ran. */
    at_goal: atGoal
      ? {
        volunteers: atGoal.volunteers, held: atGoal.held, round_p99_ms: atGoal.round.whole.p99, begin_p99_ms: atGoal.round.begin.p99, commit_p99_ms: atGoal.round.commit.p99,
        kb_per_volunteer: atGoal.memory.kbPerVolunteer,
      }
      : null,
    meets_goal: {
      volunteers: (top?.volunteers ?? 0) >= cfg.goal.volunteers,
      round_p99: atGoal ? atGoal.held && atGoal.underGoal : false,
      kb_per_volunteer: atGoal ? atGoal.memory.kbPerVolunteer <= cfg.goal.kbPerVolunteer : false,
      two_nodes_volunteers: two.max_volunteers >= cfg.goal.twoNodeVolunteers,
    },
  };
}

/** The two-node phase's figures: its largest step held under the p99 goal, and that step's round and memory. */
export function twoNodeSummary(steps: StepReport[], cfg: CoordinatorBenchConfig) {
  const top = steps.filter((s) => s.held && s.underGoal).at(-1);
  return {
    max_volunteers: top?.volunteers ?? 0,
    max_volunteers_held: steps.filter((s) => s.held).at(-1)?.volunteers ?? 0,
    round_p99_ms: top?.round.whole.p99 ?? null,
    round_p50_ms: top?.round.whole.p50 ?? null,
    /** Both nodes' RSS and the redis-server's, after GC, baseline subtracted, per volunteer (KiB). */
    kb_per_volunteer: top?.memory.kbPerVolunteer ?? null,
    /** The two nodes' RSS alone, after GC, baseline subtracted, per volunteer (KiB): without redis-server's history. */
    nodes_kb_per_volunteer: top?.memory.nodesKbPerVolunteer ?? null,
    redis_rss_mib: top?.memory.redisRssBytes === undefined ? null : r2(top.memory.redisRssBytes / 2 ** 20),
    server_cpu_percent: top?.server.cpuPercent ?? null,
    goal_volunteers: cfg.goal.twoNodeVolunteers,
  };
}
