// A server node under test, forked by bench/coordinator.ts: `startServer()` with the options
// server/src/main.ts passes (loopback, a free port, a fresh data directory, and for several nodes
// the shared Redis and a node id), plus an IPC channel so
// the benchmark can ask for memory after a forced GC (`--expose-gc`), CPU time and event-loop delay
// of this process (and heap snapshots, for TABFLEET_BENCH_COORDINATOR_HEAP_SNAPSHOTS). Nothing of
// the server is changed; the process exits when its parent goes away.
import { monitorEventLoopDelay, PerformanceObserver, constants as perf } from 'node:perf_hooks';
import { writeHeapSnapshot } from 'node:v8';
import { pathToFileURL } from 'node:url';
import type { startServer as StartServer } from '@tabfleet/server';
import { BENCH_MAX_ACTIVE_JOBS } from './config';
import { sampleProcess } from './process-sample';
import type { FromServer, ToServer } from './messages';

// With a Redis URL and a node id: one of several nodes sharing that Redis (as `main.ts --redis URL --node ID`).
const [dataDir, token, redisUrl, nodeId] = process.argv.slice(2);
if (!dataDir || !token || !process.send) {
  console.error('usage: forked by bench/coordinator.ts with <dataDir> <token> [<redisUrl> <nodeId>]');
  process.exit(2);
}
const send = (m: FromServer) => process.send?.(m);
// Without a parent nobody would ever stop this server.
process.on('disconnect', () => process.exit(0));

const loop = monitorEventLoopDelay({ resolution: 10 });
loop.enable();
// The collector's pauses since the previous stats: how much of the loop's delay is garbage collection.
const gcPauses = { ms: 0, maxMs: 0, major: 0 };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gcPauses.ms += e.duration;
    gcPauses.maxMs = Math.max(gcPauses.maxMs, e.duration);
    if ((e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === perf.NODE_PERFORMANCE_GC_MAJOR) gcPauses.major++;
  }
}).observe({ entryTypes: ['gc'] });

try {
  // TABFLEET_BENCH_COORDINATOR_SERVER_APP=<app.ts>: a modified copy of server/src/app.ts, to measure
  // a proposed server change without touching server/.
  const app = process.env.TABFLEET_BENCH_COORDINATOR_SERVER_APP;
  const { startServer } = (await import(app ? pathToFileURL(app).href : '@tabfleet/server')) as { startServer: typeof StartServer };
  // Every simulated volunteer connects from 127.0.0.1: no per-address caps, and no per-address
  // request bucket either (each Socket.IO connection takes two tokens of it, its engine handshake and
  // its namespace's).
  const server = await startServer({
    port: 0, host: '127.0.0.1', dataDir, token, redisUrl, nodeId,
    // Jobs of 100 members: 10,000 volunteers on a node take 100 jobs, 20,000 on two nodes 200 (the
    // default limit, LIMITS.maxActiveJobs = 64, stopped the steps at 6,400 volunteers).
    maxActiveJobs: BENCH_MAX_ACTIVE_JOBS, addressLimits: { connections: 100_000, jobShare: 1 }, httpRateLimit: { perSecond: 100_000, burst: 100_000 },
    networkRules: false,
  });
  process.on('message', (m: ToServer) => {
    if (m.type === 'exit') process.exit(0);
    if (m.type === 'snapshot') send({ type: 'snapshot', file: writeHeapSnapshot(m.file) });
    if (m.type === 'stats') {
      const { mem, cpuMs, wallMs, gc } = sampleProcess(m.gc);
      send({
        type: 'stats', rssBytes: mem.rss, heapUsedBytes: mem.heapUsed, heapTotalBytes: mem.heapTotal, externalBytes: mem.external, arrayBuffersBytes: mem.arrayBuffers,
        cpuMs, wallMs, loopDelayP50Ms: loop.percentile(50) / 1e6, loopDelayP99Ms: loop.percentile(99) / 1e6, loopDelayMaxMs: loop.max / 1e6, gc,
        gcPauseMs: gcPauses.ms, gcMaxPauseMs: gcPauses.maxMs, gcMajor: gcPauses.major,
      });
      loop.reset();
      Object.assign(gcPauses, { ms: 0, maxMs: 0, major: 0 });
    }
  });
  console.log(`[server] ready ${server.url}`);
  send({ type: 'ready', url: server.url, pid: process.pid });
} catch (e) {
  send({ type: 'fatal', message: (e as Error).stack ?? String(e) });
  process.exit(1);
}
