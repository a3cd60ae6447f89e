// `npm run bench -- coordinator`: how many simulated volunteers one server node holds while they
// heartbeat and run rounds, how long a round waits on the server, and what a connection costs it.
//
// Files: config.ts (steps, behaviour, job spec, the goal), child.ts (forked processes), nodes.ts (the
// server side: one node, or several on a redis-server), step.ts (ramp and windows of one step),
// report.ts (figures, summary, definitions), http.ts (/metrics, job creation), client.ts +
// signaling.ts (the simulated volunteers), server-process.ts (a server node).
//
// Two phases, each with fresh processes. One node: the server (bench/coordinator/server-process.ts:
// `startServer()` as server/src/main.ts runs it, on 127.0.0.1, a free port and a fresh data
// directory, SQLite). Two nodes: two such servers with `redisUrl` and a node id each, sharing one real
// redis-server (store, job leases, calls between nodes, the Socket.IO Redis adapter), as main.ts
// --redis runs several nodes; jobs are created on the nodes in turn, each node owns the jobs it
// created, and a job's members connect to its node (the cluster would route events from another
// node over Redis, but a volunteer sent to the owner costs no call between nodes). Client processes
// (bench/coordinator/client.ts) hold up to `perProcess` socket.io-client connections each, all forked
// by this one. Volunteers are added in steps (one node: 500, 1000, 2000, 3000, 4000, 5000, 7500,
// 10,000; two nodes: 2000 to 10,000 by 2000, 15,000, 20,000); each step creates jobs of `jobSize` members for the new
// volunteers (minWorkers = maxWorkers = jobSize, so a job's first round waits for all of them;
// localsgd, H = 1, targetSteps large so jobs do not end, checkpointEvery at the job default), lets
// the clients join them, then measures `runs` windows. Every member of a job sits in one client
// process; jobs of earlier steps keep running meanwhile. A phase stops after a step not held, or held
// with a whole-round p99 over 4 × the goal (`stopOverGoalFactor`), or when its time budget is spent.
//
// Each volunteer "trains" for `trainMs` (uniform) after each commit, sends round:ready; after
// round:begin it signals new ring neighbours through the server (as a real tab's WebRTC transport
// does) and "allreduces" for `allreduceMs`, sends round:result; the round's uploader uploads a
// checkpoint of the model's real size; a volunteer told to load a checkpoint downloads it over HTTP;
// and each heartbeats `status` at the period its server names (no ack, as packages/worker/src/runtime.ts does).
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
//   round's pooled p99 is under 250 ms; max_volunteers_two_nodes the same on two nodes. Issue 35's goal:
//   10,000 on one node and 20,000 on two, at most 16 KiB of RSS per volunteer.
//
// - the library floor (coordinator/floor.ts), after both phases: the goal's count of connections on a
//   bare Socket.IO server with the real server's options and the same round traffic, and on a plain
//   `ws` server (idle), memory per connection, CPU per event and the whole round measured the same
//   way, so the real server's figures read against what the library costs by itself here.
//
// Bounded: every wait has a time limit, the whole run a budget (it stops ramping and reports what it
// measured), and all processes are killed at the end, on failure too. Loopback only.
//
// For investigating (none is needed for a normal run): TABFLEET_BENCH_COORDINATOR_STEPS=500,2000 and
// TABFLEET_BENCH_COORDINATOR_TWO_NODE_STEPS=2000 (other steps; 0: skip that phase), TABFLEET_BENCH_COORDINATOR_FLOOR=N
// (the library floor's connections; 0: none),
// TABFLEET_BENCH_COORDINATOR_CLIENT_NICE=0 (clients at the servers' priority; default config.ts CLIENT_NICE),
// TABFLEET_BENCH_COORDINATOR_ROUND_ACKS=1 (volunteers ask for an ack on round:ready and round:result,
// as the runtime did before it stopped), TABFLEET_BENCH_COORDINATOR_CPU_PROF=<dir> (V8 CPU profile of each server),
// TABFLEET_BENCH_COORDINATOR_HEAP_SNAPSHOTS=<dir> (server heap snapshots after each step),
// TABFLEET_BENCH_COORDINATOR_SERVER_NODE_ARGS / _SERVER_LOG (e.g. "--trace-gc" and where its output
// goes), TABFLEET_BENCH_COORDINATOR_SERVER_APP=<copy of server/src/app.ts> (measure a modified server).
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { ROUND_TIMING } from '@tabfleet/protocol';
import { Child, type ClientChild } from './coordinator/child';
import { benchJobSpec, coordinatorConfig, type CoordinatorBenchConfig } from './coordinator/config';
import type { FromClient, ServerStats, ToClient } from './coordinator/messages';
import { ServerNodes } from './coordinator/nodes';
import { floorSummary, measureFloor, type FloorKind, type FloorReport } from './coordinator/floor';
import { DEFINITIONS, summarize, twoNodeSummary, type StepReport } from './coordinator/report';
import { runStep, sleep, type BenchState } from './coordinator/step';
import { runRecord } from './machine';
import type { BenchOptions } from './run';

export { benchJobSpec, coordinatorConfig, type CoordinatorBenchConfig } from './coordinator/config';

const repoRoot = resolve(import.meta.dirname, '..');

interface Phase {
  nodes: number;
  store: 'sqlite' | 'redis';
  stopReason: string;
  /** A step that broke off with an error (its figures are not in `steps`). */
  failure: { volunteers: number; error: string } | null;
  baseline: ServerStats | null;
  steps: StepReport[];
}

type AnyChild = Child<unknown, { type: string }>;

/** Starts `nodeCount` server nodes (several: on a fresh redis-server) and ramps them through `steps`. */
async function runPhase(
  cfg: CoordinatorBenchConfig, nodeCount: number, steps: number[], budgetMs: number, dataDir: string, token: string, children: AnyChild[], log: (line: string) => void,
): Promise<Phase> {
  const phase: Phase = { nodes: nodeCount, store: nodeCount > 1 ? 'redis' : 'sqlite', stopReason: 'all steps done', failure: null, baseline: null, steps: [] };
  // TABFLEET_BENCH_COORDINATOR_CPU_PROF=<dir>: a V8 CPU profile of each server, written when it exits.
  const profDir = process.env.TABFLEET_BENCH_COORDINATOR_CPU_PROF;
  // TABFLEET_BENCH_COORDINATOR_SERVER_NODE_ARGS="--trace-gc …": more node flags for the servers, whose
  // output goes to TABFLEET_BENCH_COORDINATOR_SERVER_LOG (default: the data directory, deleted at the end).
  const serverArgs = (process.env.TABFLEET_BENCH_COORDINATOR_SERVER_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const logBase = process.env.TABFLEET_BENCH_COORDINATOR_SERVER_LOG ? resolve(process.env.TABFLEET_BENCH_COORDINATOR_SERVER_LOG) : join(dataDir, 'server.log');
  const snapshotDir = process.env.TABFLEET_BENCH_COORDINATOR_HEAP_SNAPSHOTS;
  if (snapshotDir) mkdirSync(snapshotDir, { recursive: true });
  const nodes = await ServerNodes.start({
    count: nodeCount, dataDir: join(dataDir, `${nodeCount}-node`), token,
    execArgv: [...(profDir ? ['--cpu-prof', `--cpu-prof-dir=${resolve(profDir)}`] : []), ...serverArgs],
    logFile: (i) => (nodeCount > 1 ? `${logBase}.${nodeCount}-node-${i}` : logBase),
  }, (c) => children.push(c as unknown as AnyChild), log);
  const clients: ClientChild[] = [];
  try {
    // Let start-up garbage go before the baseline (RSS after GC with no volunteers and no jobs).
    await sleep(2000);
    await nodes.stats(true);
    await sleep(500);
    const baseline = await nodes.stats(true);
    phase.baseline = baseline;
    // The budget counts from here: starting the servers has its own time limits, and on a busy machine
    // it once took so long that a quick run's two-node phase had no time left for its one step.
    const deadline = Date.now() + budgetMs;
    log(`baseline: RSS ${(baseline.rssBytes / 2 ** 20).toFixed(1)} MiB, heap ${(baseline.heapUsedBytes / 2 ** 20).toFixed(1)} MiB${nodeCount > 1 ? ` (${nodeCount} nodes and redis-server)` : ''}`);
    const newClient = async () => {
      // TABFLEET_BENCH_COORDINATOR_CLIENT_CPU_PROF=<dir>: V8 CPU profiles of the client processes too.
      const clientProf = process.env.TABFLEET_BENCH_COORDINATOR_CLIENT_CPU_PROF;
      const execArgv = clientProf ? ['--cpu-prof', `--cpu-prof-dir=${resolve(clientProf)}`] : [];
      const c = Object.assign(new Child<ToClient, FromClient>(`client ${clients.length + 1}`, 'client.ts', [JSON.stringify(cfg.behaviour)], execArgv), { load: 0 });
      children.push(c as unknown as AnyChild);
      c.renice(cfg.clientNice);
      clients.push(c);
      await c.next('started', 60_000);
      return c;
    };
    const st: BenchState = {
      cfg, token, nodes, clients, newClient, log, snapshotDir, baseline,
      volunteers: 0, jobCount: 0, previous: { n: 0, rss: baseline.rssBytes, heap: baseline.heapUsedBytes },
    };
    for (const target of steps) {
      if (target <= st.volunteers) continue;
      // The windows of a step take a known time; the ramp gets what is left of the budget.
      const windowsMs = cfg.settleMs + cfg.windows * (cfg.windowMs + 1000);
      const rampTimeoutMs = Math.min(cfg.behaviour.rampTimeoutMs, deadline - Date.now() - windowsMs);
      if (rampTimeoutMs < 10_000) {
        phase.stopReason = `time budget used up before the ${target} step`;
        break;
      }
      const newJobs = Math.ceil((target - st.volunteers) / cfg.jobSize);
      if (st.jobCount + newJobs > cfg.maxActiveJobs) {
        phase.stopReason = `${target} volunteers need ${st.jobCount + newJobs} jobs of ≤${cfg.jobSize}; the servers allow ${cfg.maxActiveJobs}`;
        break;
      }
      try {
        const step = await runStep(st, target, newJobs, rampTimeoutMs);
        phase.steps.push(step);
        if (!step.held) {
          phase.stopReason = `the ${target} step was not held: ${step.problems.join('; ')}`;
          break;
        }
        if (step.round.whole.p99 > cfg.stopOverGoalFactor * cfg.goal.p99Ms) {
          phase.stopReason = `the ${target} step's whole-round p99 (${step.round.whole.p99} ms) is over ${cfg.stopOverGoalFactor} × the goal's ${cfg.goal.p99Ms} ms: no larger step is tried`;
          break;
        }
      } catch (e) {
        const message = (e as Error).message;
        phase.stopReason = `the ${target} step failed: ${message.split('\n')[0]}`;
        phase.failure = { volunteers: target, error: message.slice(0, 4000) };
        log(`  ${phase.stopReason}`);
        break;
      }
    }
    // Stop: servers first (no disconnect storm to process), then the clients.
    await nodes.stop();
    for (const c of clients) c.send({ type: 'stop' });
    await Promise.all(clients.map((c) => c.stopped(5_000)));
  } finally {
    nodes.kill();
    for (const c of clients) c.kill();
  }
  return phase;
}

export async function runCoordinatorBench(opts: BenchOptions): Promise<{ file: string; report: Record<string, unknown> }> {
  const cfg = coordinatorConfig(opts.runs, opts.quick);
  const file = opts.out ?? join(repoRoot, 'bench', 'results', opts.quick ? 'coordinator.quick.json' : 'coordinator.json');
  const t0 = Date.now();
  const log = (line: string) => console.log(`[coordinator] ${line}`);
  log([
    `${opts.quick ? 'quick mode, ' : ''}one node: steps ${cfg.steps.join(', ')}; ${cfg.twoNodes.nodes} nodes on Redis: steps ${cfg.twoNodes.steps.join(', ')};`,
    `${cfg.jobSize} per job, ≤${cfg.perProcess} per client process; ${cfg.windows} × ${cfg.windowMs} ms windows per step;`,
    `load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`,
  ].join(' '));

  const dataDir = mkdtempSync(join(os.tmpdir(), 'tabfleet-bench-coordinator-'));
  const token = randomBytes(16).toString('hex');
  const children: AnyChild[] = [];
  const killAll = () => {
    for (const c of children) c.kill();
  };
  process.once('exit', killAll);
  // A run that fails or has a step not held keeps its servers' logs (the data directory goes): they say why.
  let keepLogs = true;
  try {
    const single: Phase = cfg.steps.length
      ? await runPhase(cfg, 1, cfg.steps, cfg.budgetMs, dataDir, token, children, log)
      : { nodes: 1, store: 'sqlite', stopReason: 'no steps', failure: null, baseline: null, steps: [] };
    log(`one node: ${single.stopReason}`);
    let two: Phase | null = null;
    if (cfg.twoNodes.steps.length) {
      log(`${cfg.twoNodes.nodes} nodes sharing a redis-server:`);
      const twoLog = (l: string) => log(`[${cfg.twoNodes.nodes} nodes] ${l}`);
      two = await runPhase(cfg, cfg.twoNodes.nodes, cfg.twoNodes.steps, cfg.twoNodes.budgetMs, dataDir, token, children, twoLog).catch((e: Error) => ({
        // No redis-server, or a node that did not start: reported, and the one-node figures still written.
        nodes: cfg.twoNodes.nodes, store: 'redis' as const, stopReason: `could not start: ${e.message.split('\n')[0]}`,
        failure: { volunteers: 0, error: e.message.slice(0, 4000) }, baseline: null, steps: [],
      }));
      log(`${cfg.twoNodes.nodes} nodes: ${two.stopReason}`);
    }
    // The library floor at the goal's count, after the real phases (their processes are gone).
    const floor: Partial<Record<FloorKind, FloorReport | { error: string }>> = {};
    for (const kind of cfg.floorConnections ? (['socketio', 'lean', 'ws'] as const) : []) {
      const floorOptions = {
        kind, connections: cfg.floorConnections, jobSize: cfg.jobSize, perProcess: cfg.perProcess, clientNice: cfg.clientNice,
        behaviour: cfg.behaviour, windows: cfg.windows, windowMs: cfg.windowMs, settleMs: cfg.settleMs,
      };
      floor[kind] = await measureFloor(floorOptions, log).catch((e: Error) => ({ error: e.message.slice(0, 2000) }));
    }
    keepLogs = [...single.steps, ...(two?.steps ?? [])].some((st) => !st.held) || !!single.failure || !!two?.failure;
    const record = runRecord(t0);
    const summary = { ...summarize(single.steps, cfg, two?.steps ?? []), ...floorSummary(floor, single.steps) };
    const report = {
      benchmark: 'coordinator',
      quick: opts.quick,
      commit: record.commit,
      date: record.date,
      command: record.command,
      durationMs: record.durationMs,
      stopReason: single.stopReason,
      failure: single.failure,
      options: { runs: opts.runs, ...cfg, roundTimeoutMs: ROUND_TIMING.roundTimeoutMs, jobSpec: benchJobSpec(cfg.jobSize, 0) },
      machine: {
        ...record.machine,
        note:
          'The server (or both nodes and the redis-server), every client process and this orchestrator share these cores (and the machine is shared ' +
          'with other work), so client CPU competes with the server, less so at the clients\' niceness (definitions.client_nice): see each ' +
          'window\'s server/clients/other CPU and event-loop delay.',
      },
      definitions: DEFINITIONS,
      server: { baseline: baselineOf(single.baseline) },
      steps: single.steps,
      twoNodes: two && {
        nodes: two.nodes, store: two.store, stopReason: two.stopReason, failure: two.failure, server: { baseline: baselineOf(two.baseline) },
        steps: two.steps, summary: twoNodeSummary(two.steps, cfg),
      },
      floor,
      summary,
    };
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
    const s = report.summary;
    log([
      `summary: max_volunteers ${s.max_volunteers} (held: ${s.max_volunteers_held}), round_p99_ms ${s.round_p99_ms} (begin ${s.begin_p99_ms}, commit ${s.commit_p99_ms}),`,
      `round_p50_ms ${s.round_p50_ms}, kb_per_volunteer ${s.kb_per_volunteer}; max_volunteers_two_nodes ${s.max_volunteers_two_nodes} (round_p99_ms ${s.two_nodes_round_p99_ms})`,
      `(goal ${cfg.goal.volunteers} / ${cfg.goal.twoNodeVolunteers}, <${cfg.goal.p99Ms} ms, ≤${cfg.goal.kbPerVolunteer} KiB); ${(record.durationMs / 60_000).toFixed(1)} min`,
    ].join(' '));
    log(`library floor at ${cfg.floorConnections}: Socket.IO ${s.socketio_floor_kb_per_connection} KiB (${s.socketio_floor_cpu_us_per_event} µs/event), `
      + `lean ${s.lean_floor_kb_per_connection} KiB (${s.lean_floor_cpu_us_per_event} µs/event), ws ${s.ws_floor_kb_per_connection} KiB`);
    log(`wrote ${relative(process.cwd(), file) || file}`);
    return { file, report };
  } finally {
    killAll();
    process.removeListener('exit', killAll);
    if (keepLogs) keepServerLogs(dataDir, log);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Copies the servers' logs (server.log, server.log.N-node-I) out of the data directory before it is removed. */
function keepServerLogs(dataDir: string, log: (line: string) => void): void {
  try {
    const logs = readdirSync(dataDir).filter((f) => f.startsWith('server.log'));
    if (!logs.length) return;
    const kept = mkdtempSync(join(os.tmpdir(), 'tabfleet-bench-coordinator-logs-'));
    for (const f of logs) copyFileSync(join(dataDir, f), join(kept, f));
    log(`a step was not held or the run failed: the servers' logs are kept in ${kept}`);
  } catch (e) {
    log(`could not keep the servers' logs: ${(e as Error).message}`);
  }
}

function baselineOf(b: ServerStats | null) {
  return b && { rssBytes: b.rssBytes, heapUsedBytes: b.heapUsedBytes, heapTotalBytes: b.heapTotalBytes, externalBytes: b.externalBytes };
}

export async function run(opts: BenchOptions): Promise<void> {
  await runCoordinatorBench(opts);
}
