// `npm run bench -- coordinator`: how many simulated volunteers one server node holds while they
// heartbeat and run rounds, how long a round waits on the server, and what a connection costs it.
//
// Files: config.ts (steps, behaviour, job spec), child.ts (forked processes), step.ts (ramp and
// windows of one step), report.ts (figures, summary, definitions), http.ts (/metrics, job creation),
// client.ts + signaling.ts (the simulated volunteers), server-process.ts (the server node).
//
// Processes: the server node (bench/coordinator/server-process.ts: `startServer()` as
// server/src/main.ts runs it, on 127.0.0.1, a free port and a fresh data directory) and client
// processes (bench/coordinator/client.ts) holding up to `perProcess` socket.io-client connections
// each, all forked by this one. Volunteers are added in steps (500, 1000, 2000, 5000, 6400); each step
// creates jobs of `jobSize` members for the new volunteers (minWorkers = maxWorkers = jobSize, so a
// job's first round waits for all of them; localsgd, H = 1, targetSteps large so jobs do not end,
// checkpointEvery at the job default), lets the clients join them, then measures `runs` windows.
// Every member of a job sits in one client process; jobs of earlier steps keep running meanwhile.
//
// Each volunteer "trains" for `trainMs` (uniform) after each commit, sends round:ready; after
// round:begin it signals new ring neighbours through the server (as a real tab's WebRTC transport
// does) and "allreduces" for `allreduceMs`, sends round:result; the round's uploader uploads a
// checkpoint of the model's real size; a volunteer told to load a checkpoint downloads it over HTTP;
// and each heartbeats `status` every `heartbeatMs`.
//
// Definitions (also written into the JSON, see report.ts DEFINITIONS):
// - the round as a member sees it, both halves: begin = the LAST member of its job sent
//   `round:ready` → this member received `round:begin`; commit = the LAST member sent `round:result`
//   → this member received `round:commit`; whole = begin + commit, per member and round. Stamps are
//   taken in the client process that holds the whole job (sub-ms epoch clock). Rounds re-formed
//   after an abort are not sampled. Percentiles are over every sample of a step (all windows
//   pooled). The begin half is split per round into `server` (the server's own begin time, read from
//   `deadline − roundTimeoutMs`, 1 ms resolution, minus the last ready) and `delivery` (first receipt
//   minus that begin time), with client and server event-loop delay beside them, so queueing on a
//   starved client is visible as such.
// - memory per volunteer: (server RSS after a forced full GC at N volunteers − the same at 0
//   volunteers before any job) ÷ N, in KiB; heap-used and the RSS the server reports on /metrics
//   (during load, no forced GC) are reported beside it, as is the marginal cost between steps.
// - a step is held when every volunteer was admitted to its job, the server's
//   `tabfleet_volunteers_connected` equals N, and in every window no connection dropped, no job ended
//   and every job committed at least one round. max_volunteers is the largest step held whose whole
//   round's pooled p99 is under 250 ms.
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
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { LIMITS, ROUND_TIMING } from '@tabfleet/protocol';
import { Child, type ClientChild, type ServerChild } from './coordinator/child';
import { benchJobSpec, coordinatorConfig } from './coordinator/config';
import type { FromClient, FromServer, ToClient, ToServer } from './coordinator/messages';
import { DEFINITIONS, summarize, type StepReport } from './coordinator/report';
import { runStep, sleep, type BenchState } from './coordinator/step';
import { machineInfo } from './machine';
import type { BenchOptions } from './run';

export { benchJobSpec, coordinatorConfig, type CoordinatorBenchConfig } from './coordinator/config';

const repoRoot = resolve(import.meta.dirname, '..');

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
    const st: BenchState = {
      cfg, url, token, server, clients, newClient, log, snapshotDir, baseline,
      volunteers: 0, jobCount: 0, previous: { n: 0, rss: baseline.rssBytes, heap: baseline.heapUsedBytes },
    };

    for (const target of cfg.steps) {
      if (target <= st.volunteers) continue;
      // The windows of a step take a known time; the ramp gets what is left of the budget.
      const windowsMs = cfg.settleMs + cfg.windows * (cfg.windowMs + 1000);
      const rampTimeoutMs = Math.min(cfg.behaviour.rampTimeoutMs, deadline - Date.now() - windowsMs);
      if (rampTimeoutMs < 10_000) {
        stopReason = `time budget of ${cfg.budgetMs} ms used up before the ${target} step`;
        break;
      }
      const newJobs = Math.ceil((target - st.volunteers) / cfg.jobSize);
      if (st.jobCount + newJobs > LIMITS.maxActiveJobs) {
        stopReason = `${target} volunteers need ${st.jobCount + newJobs} jobs of ≤${cfg.jobSize}; the server allows ${LIMITS.maxActiveJobs}`;
        break;
      }
      try {
        const step = await runStep(st, target, newJobs, rampTimeoutMs);
        steps.push(step);
        if (!step.held) {
          stopReason = `the ${target} step was not held: ${step.problems.join('; ')}`;
          break;
        }
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
    log(`summary: max_volunteers ${s.max_volunteers} (held: ${s.max_volunteers_held}), round_p99_ms ${s.round_p99_ms} (begin ${s.begin_p99_ms}, commit ${s.commit_p99_ms}), round_p50_ms ${s.round_p50_ms}, kb_per_volunteer ${s.kb_per_volunteer} (goal ${cfg.goal.volunteers}, <${cfg.goal.p99Ms} ms, <${cfg.goal.kbPerVolunteer} KiB)`);
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

export async function run(opts: BenchOptions): Promise<void> {
  await runCoordinatorBench(opts);
}
