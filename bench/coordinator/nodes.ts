// The server side of a coordinator benchmark phase: one server node (SQLite, as `npm start` runs it),
// or several nodes sharing a real redis-server as server/src/main.ts runs them with --redis (jobs
// leased to the node that created them, calls between nodes and emits to volunteers on other nodes
// over Redis). The steps see one object: stats and /metrics summed over the nodes (and the
// redis-server's CPU and memory, which serve them), jobs created round-robin over the nodes.
import { mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { startRedisServer } from '@tabfleet/server/testing';
import { Child, type ServerChild } from './child';
import { createJob, scrape, type Scrape } from './http';
import type { FromServer, ServerStats, ToServer } from './messages';
import type { JobSpecInput } from '@tabfleet/protocol';

/** CPU (user + system, ms) and RSS (bytes) of a process from /proc, or null where there is none. */
function procUsage(pid: number): { cpuMs: number; rssBytes: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields after the command: state is f[0], utime f[11], stime f[12] (clock ticks, 100 per second here), rss f[21] (pages).
    return { cpuMs: (Number(f[11]) + Number(f[12])) * 10, rssBytes: Number(f[21]) * 4096 };
  } catch {
    return null;
  }
}

/** The redis-server this process started (the child whose command is redis-server), found in /proc. */
function redisPid(): number | null {
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid && stat.includes('(redis-server)')) return Number(d);
    } catch {
      // gone meanwhile
    }
  }
  return null;
}

export interface NodesOptions {
  count: number;
  dataDir: string;
  token: string;
  /** Node flags for every server process (profiling, --trace-gc, …). */
  execArgv: string[];
  logFile: (i: number) => string;
}

/** One node, or `count` nodes on a fresh redis-server. */
export class ServerNodes {
  private redis: { url: string; stop(): void; pid: number | null; lastCpuMs: number } | null = null;
  readonly servers: ServerChild[] = [];
  readonly urls: string[] = [];
  private nextJob = 0;

  private constructor(private readonly register: (c: ServerChild) => void) {}

  static async start(opts: NodesOptions, register: (c: ServerChild) => void, log: (line: string) => void): Promise<ServerNodes> {
    const nodes = new ServerNodes(register);
    let redisUrl = '';
    if (opts.count > 1) {
      const r = await startRedisServer();
      const pid = redisPid();
      nodes.redis = { ...r, pid, lastCpuMs: (pid && procUsage(pid)?.cpuMs) || 0 };
      redisUrl = r.url;
      log(`redis-server ${pid ?? '?'} at ${r.url}`);
    }
    for (let i = 0; i < opts.count; i++) {
      const dir = resolve(opts.dataDir, `node-${i}`);
      mkdirSync(dir, { recursive: true });
      const args = [dir, opts.token, ...(redisUrl ? [redisUrl, `bench-node-${i}`] : [])];
      const server: ServerChild = new Child<ToServer, FromServer>(opts.count > 1 ? `server ${i}` : 'server', 'server-process.ts', args, ['--expose-gc', ...opts.execArgv], opts.logFile(i));
      register(server);
      nodes.servers.push(server);
    }
    for (const [i, s] of nodes.servers.entries()) {
      const ready = await s.next('ready', 60_000);
      nodes.urls.push(ready.url);
      log(`server ${opts.count > 1 ? `node ${i} ` : ''}pid ${ready.pid} at ${ready.url}${redisUrl ? ' (Redis store and adapter)' : ''}`);
    }
    return nodes;
  }

  get count(): number {
    return this.servers.length;
  }

  /** Every node's stats, summed (memory, CPU; the worst loop delay); with Redis, its CPU and RSS are added. */
  async stats(gc: boolean, timeoutMs = 30_000): Promise<ServerStats> {
    for (const s of this.servers) s.send({ type: 'stats', gc });
    const all = await Promise.all(this.servers.map((s) => s.next('stats', timeoutMs)));
    const sum = (k: 'rssBytes' | 'heapUsedBytes' | 'heapTotalBytes' | 'externalBytes' | 'arrayBuffersBytes' | 'cpuMs' | 'gcPauseMs' | 'gcMajor') => all.reduce((a, x) => a + x[k], 0);
    const max = (k: 'wallMs' | 'loopDelayP50Ms' | 'loopDelayP99Ms' | 'loopDelayMaxMs' | 'gcMaxPauseMs') => Math.max(...all.map((x) => x[k]));
    const out: ServerStats = {
      type: 'stats', rssBytes: sum('rssBytes'), heapUsedBytes: sum('heapUsedBytes'), heapTotalBytes: sum('heapTotalBytes'), externalBytes: sum('externalBytes'),
      arrayBuffersBytes: sum('arrayBuffersBytes'), cpuMs: sum('cpuMs'), wallMs: max('wallMs'), loopDelayP50Ms: max('loopDelayP50Ms'), loopDelayP99Ms: max('loopDelayP99Ms'),
      loopDelayMaxMs: max('loopDelayMaxMs'), gc: all.every((x) => x.gc),
      gcPauseMs: sum('gcPauseMs'), gcMaxPauseMs: max('gcMaxPauseMs'), gcMajor: sum('gcMajor'),
    };
    if (this.count > 1) {
      out.nodes = all.map((x) => ({ rssBytes: x.rssBytes, heapUsedBytes: x.heapUsedBytes, cpuMs: x.cpuMs }));
      const r = this.redis?.pid ? procUsage(this.redis.pid) : null;
      if (r && this.redis) {
        out.redis = { cpuMs: r.cpuMs - this.redis.lastCpuMs, rssBytes: r.rssBytes };
        this.redis.lastCpuMs = r.cpuMs;
        out.cpuMs += out.redis.cpuMs;
        out.rssBytes += r.rssBytes;
      }
    }
    return out;
  }

  /** /metrics of every node, summed; null when any node did not answer in time. */
  async scrape(): Promise<Scrape | null> {
    const all = await Promise.all(this.urls.map((u) => scrape(u).catch(() => null)));
    if (all.some((m) => m === null)) return null;
    const ok = all as Scrape[];
    return {
      volunteersConnected: ok.reduce((a, m) => a + m.volunteersConnected, 0),
      rssBytes: ok.reduce((a, m) => a + m.rssBytes, 0),
      heapUsedBytes: ok.reduce((a, m) => a + m.heapUsedBytes, 0),
    };
  }

  /** Creates a job on the next node in turn; that node owns it (its lease), so its volunteers connect there. */
  async createJob(token: string, spec: JobSpecInput): Promise<{ jobId: string; url: string }> {
    const url = this.urls[this.nextJob++ % this.urls.length];
    return { jobId: await createJob(url, token, spec), url };
  }

  output(): string {
    return this.servers.map((s) => s.output()).join('\n');
  }

  snapshot(dir: string, name: string): void {
    for (const [i, s] of this.servers.entries()) s.send({ type: 'snapshot', file: join(resolve(dir), `${name}${this.count > 1 ? `-node${i}` : ''}.heapsnapshot`) });
  }

  async stop(): Promise<void> {
    for (const s of this.servers) s.send({ type: 'exit' });
    await Promise.all(this.servers.map((s) => s.stopped(5_000)));
    this.redis?.stop();
  }

  kill(): void {
    for (const s of this.servers) s.kill();
    this.redis?.stop();
  }
}
