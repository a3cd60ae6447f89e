// One step of the coordinator benchmark: create the jobs for the new volunteers, let the client
// processes join them (sampling the server every 2 s meanwhile), settle, measure the windows, then
// read the server's memory after a forced GC.
import type { ClientChild } from './child';
import { benchJobSpec, type CoordinatorBenchConfig } from './config';
import type { AddResult, ServerStats, WindowSamples } from './messages';
import type { ServerNodes } from './nodes';
import { mergeReasons, r2, stepReport, systemCpu, windowReport, type RampPoint, type StepReport, type WindowReport } from './report';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What the steps of a phase share: the processes, and the running totals a step adds to. */
export interface BenchState {
  cfg: CoordinatorBenchConfig;
  token: string;
  /** One server node, or several on one Redis. */
  nodes: ServerNodes;
  clients: ClientChild[];
  newClient(): Promise<ClientChild>;
  log(line: string): void;
  /** TABFLEET_BENCH_COORDINATOR_HEAP_SNAPSHOTS: a server heap snapshot after each step's GC. */
  snapshotDir: string | undefined;
  baseline: ServerStats;
  volunteers: number;
  jobCount: number;
  previous: { n: number; rss: number; heap: number };
}

interface Ramp {
  added: AddResult[];
  rampMs: number;
  timeline: RampPoint[];
  samples: WindowSamples[];
}

/** Creates `newJobs` jobs for `adding` volunteers (whole jobs per client process) and waits for the joins. */
async function ramp(st: BenchState, adding: number, newJobs: number, rampTimeoutMs: number): Promise<Ramp> {
  const { cfg, nodes, clients } = st;
  const plan = new Map<ClientChild, { jobId: string; count: number; url: string }[]>();
  for (let i = 0; i < newJobs; i++) {
    const size = Math.floor(adding / newJobs) + (i < adding % newJobs ? 1 : 0);
    // Its members connect to the node that created (and so owns) the job.
    const { jobId, url } = await nodes.createJob(st.token, benchJobSpec(size, st.jobCount + i));
    let c = clients.find((x) => x.load + size <= cfg.perProcess);
    if (!c) c = await st.newClient();
    c.load += size;
    plan.set(c, [...(plan.get(c) ?? []), { jobId, count: size, url }]);
  }
  st.jobCount += newJobs;
  const rampStart = Date.now();
  for (const c of clients) c.send({ type: 'window' });
  for (const [c, jobs] of plan) c.send({ type: 'add', jobs, rampTimeoutMs });
  // While they join: the server's load and connection count every 2 s.
  const timeline: RampPoint[] = [];
  let ramping = true;
  const poll = (async () => {
    await nodes.stats(false);
    while (ramping) {
      await sleep(2000);
      const s = await nodes.stats(false);
      // A server too busy to answer /metrics in time is a data point, not a failure of the run.
      const m = await nodes.scrape();
      timeline.push({
        atMs: Date.now() - rampStart, volunteersConnected: m?.volunteersConnected ?? null, cpuPercent: r2((100 * s.cpuMs) / s.wallMs),
        loopDelayP99Ms: r2(s.loopDelayP99Ms), loopDelayMaxMs: r2(s.loopDelayMaxMs), rssBytes: s.rssBytes,
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
  const samples = (await Promise.all(clients.map((c) => c.next('samples', 30_000)))) as WindowSamples[];
  return { added, rampMs, timeline, samples };
}

/** `cfg.windows` measurement windows; every client sample of every window is also kept for the pooled figures. */
async function measureWindows(st: BenchState): Promise<{ windows: WindowReport[]; samples: WindowSamples[] }> {
  const { cfg, nodes, clients, log } = st;
  const windows: WindowReport[] = [];
  const pooled: WindowSamples[] = [];
  for (let w = 0; w < cfg.windows; w++) {
    await nodes.stats(false); // resets the servers' CPU and loop-delay counters
    for (const c of clients) c.send({ type: 'window' });
    const cpu0 = systemCpu();
    // Memory as the server itself reports it, mid-window.
    await sleep(cfg.windowMs / 2);
    const metrics = await nodes.scrape();
    await sleep(cfg.windowMs / 2);
    for (const c of clients) c.send({ type: 'collect' });
    const samples = (await Promise.all(clients.map((c) => c.next('samples', 30_000)))) as WindowSamples[];
    const s = await nodes.stats(false);
    const wr = windowReport(samples, s, metrics, systemCpu(), cpu0);
    windows.push(wr);
    pooled.push(...samples);
    log([
      `  window ${w + 1}: round p50 ${wr.round.p50} p99 ${wr.round.p99} ms (begin half p99 ${wr.barrier.p99}: server part ${wr.barrierServer.p99},`,
      `delivery ${wr.delivery.p99}; commit half p99 ${wr.commit.p99}); ${wr.signalsSent} signals, ${wr.checkpointsUploaded} checkpoints;`,
      `${wr.roundsPerSec.toFixed(1)} rounds/s; server CPU ${wr.server.cpuPercent.toFixed(0)}% (${wr.server.cpuUsPerEvent.toFixed(0)} µs/event),`,
      `loop p99 ${wr.server.loopDelayP99Ms.toFixed(1)} ms, GC ${wr.server.gcPauseMs.toFixed(0)} ms (longest ${wr.server.gcMaxPauseMs.toFixed(1)}, ${wr.server.gcMajor} major);`,
      `clients CPU ${wr.clients.cpuPercent.toFixed(0)}%, loop p99 ${wr.clients.loopDelayP99Ms.toFixed(1)} ms;`,
      `other work CPU ${wr.otherCpuPercent?.toFixed(0) ?? '?'}%; errors ${wr.errors}`,
    ].join(' '));
  }
  return { windows, samples: pooled };
}

/** Ramps to `target` volunteers and measures; the caller decides what a step that is not held means. */
export async function runStep(st: BenchState, target: number, newJobs: number, rampTimeoutMs: number): Promise<StepReport> {
  const { cfg, nodes, log } = st;
  const adding = target - st.volunteers;
  log(`step ${target}: creating ${newJobs} jobs for ${adding} more volunteers`);
  const r = await ramp(st, adding, newJobs, rampTimeoutMs);
  st.volunteers = target;
  const admitted = r.added.reduce((s, a) => s + a.admitted, 0);
  const problems: string[] = [];
  const failures = r.added.flatMap((a) => a.failures).slice(0, 3).join('; ');
  if (admitted < adding) problems.push(`${adding - admitted} of ${adding} new volunteers not admitted: ${failures}`);
  const rampDrops = r.samples.reduce((a, x) => a + x.disconnects, 0);
  const worstLoop = r.timeline.reduce((m, p) => Math.max(m, p.loopDelayMaxMs), 0);
  const drops = `${rampDrops} disconnects${rampDrops ? ` ${JSON.stringify(mergeReasons(r.samples))}` : ''}`;
  log(`  ${admitted}/${adding} admitted in ${r.rampMs} ms (${((admitted * 1000) / r.rampMs).toFixed(0)}/s); ${drops}; server loop delay max ${worstLoop.toFixed(0)} ms; settling ${cfg.settleMs} ms`);
  await sleep(cfg.settleMs);

  const { windows, samples } = await measureWindows(st);
  const mem = await nodes.stats(true, 60_000);
  if (st.snapshotDir) {
    nodes.snapshot(st.snapshotDir, `server-${target}`);
    for (const s of nodes.servers) log(`  heap snapshot ${(await s.next('snapshot', 120_000)).file}`);
  }
  const errorSamples = samples.flatMap((s) => s.errorSamples).slice(0, 10);
  const step = stepReport(
    target, st.jobCount, st.clients.length, r.added, r.rampMs, r.timeline, r.samples, windows, mem, st.baseline, st.previous, problems, errorSamples, samples, cfg.goal.p99Ms,
  );
  if (!step.held) step.serverLogTail = nodes.output().split('\n').slice(-20);
  st.previous = { n: target, rss: mem.rssBytes, heap: mem.heapUsedBytes };
  const { whole, begin, commit } = step.round;
  log([
    `  ${step.held ? 'held' : 'NOT held'}: whole round p50 ${whole.p50} p99 ${whole.p99} ms (begin half p99 ${begin.p99}, commit half p99 ${commit.p99};`,
    `pooled over ${whole.count} samples); ${step.memory.kbPerVolunteer} KiB/volunteer (RSS after GC), heap ${step.memory.heapKbPerVolunteer} KiB`,
  ].join(' ') + (step.problems.length ? `; ${step.problems.join('; ')}` : ''));
  return step;
}
