// The library floor, measured in the same run as the real server: the same number of connections
// (and for Socket.IO the same round traffic) on a server of the library alone (floor-server.ts), so
// the real server's memory and CPU per volunteer read against what Socket.IO, or the `ws` package
// beneath it, costs by itself on this machine and Node. Memory as the real phases measure it (RSS
// after a forced GC at N connections − the same at none, ÷ N); CPU as server CPU ÷ events the
// clients sent (`cpuUsPerEvent`), pooled over the windows; the whole round as the members see it
// (floor-client.ts), every window's samples pooled.
import { distribution, type Distribution } from '../stats';
import { Child } from './child';
import type { ClientBehaviour } from './messages';
import { sleep } from './step';

/** Bare Socket.IO, the lean engine on `ws` (lean-engine.ts) with the same rounds, or plain idle `ws` connections. */
export type FloorKind = 'socketio' | 'lean' | 'ws';

export interface FloorReport {
  kind: FloorKind;
  connections: number;
  /** (RSS after GC at `connections` − before any) ÷ connections, KiB. */
  kbPerConnection: number;
  heapKbPerConnection: number;
  /** Socket.IO and lean: server CPU ÷ events the clients sent, over the windows pooled (µs); ws: null (idle connections). */
  cpuUsPerEvent: number | null;
  cpuPercent: number | null;
  eventsPerSec: number | null;
  /** Socket.IO and lean: the whole round as members see it (as the real phases' round_ms), every window's samples pooled; ws: null. */
  roundMs: Distribution | null;
  openMs: number;
}

interface FloorStats { type: 'stats'; rssBytes: number; heapUsedBytes: number; connections: number; events: number; cpuMs: number; wallMs: number }
type FromFloorServer = { type: 'ready'; url: string } | FloorStats | { type: 'fatal'; message: string };
type ToFloorServer = { type: 'stats'; gc: boolean } | { type: 'exit' };
type FromFloorClient = { type: 'started' } | { type: 'opened'; count: number; ms: number } | { type: 'samples'; roundMs: number[] } | { type: 'fatal'; message: string };
type ToFloorClient = { type: 'open'; kind: FloorKind; url: string; jobs: string[]; jobSize: number; nodeVolunteers: number } | { type: 'window' } | { type: 'collect' } | { type: 'exit' };

export interface FloorOptions {
  kind: FloorKind;
  connections: number;
  jobSize: number;
  perProcess: number;
  /** The client processes' niceness (config.ts clientNice). */
  clientNice: number;
  behaviour: ClientBehaviour;
  windows: number;
  windowMs: number;
  settleMs: number;
}

export async function measureFloor(o: FloorOptions, log: (line: string) => void): Promise<FloorReport> {
  const server = new Child<ToFloorServer, FromFloorServer>(`${o.kind} floor`, 'floor-server.ts', [o.kind, String(o.jobSize)], ['--expose-gc']);
  const clients: Child<ToFloorClient, FromFloorClient>[] = [];
  const stats = async (gc: boolean) => {
    server.send({ type: 'stats', gc });
    return server.next('stats', 60_000);
  };
  try {
    const { url } = await server.next('ready', 60_000);
    await sleep(2000);
    await stats(true);
    const baseline = await stats(true);
    const jobs = Array.from({ length: Math.ceil(o.connections / o.jobSize) }, (_, i) => `floor-job-${i}`);
    const jobsPerProcess = Math.max(1, Math.floor(o.perProcess / o.jobSize));
    const t0 = performance.now();
    for (let i = 0; i < jobs.length; i += jobsPerProcess) {
      const c = new Child<ToFloorClient, FromFloorClient>(`${o.kind} floor client ${clients.length + 1}`, 'floor-client.ts', [JSON.stringify(o.behaviour)], []);
      c.renice(o.clientNice);
      clients.push(c);
      await c.next('started', 60_000);
      c.send({ type: 'open', kind: o.kind, url, jobs: jobs.slice(i, i + jobsPerProcess), jobSize: o.jobSize, nodeVolunteers: o.connections });
    }
    await Promise.all(clients.map((c) => c.next('opened', o.behaviour.rampTimeoutMs)));
    const openMs = performance.now() - t0;
    await sleep(o.settleMs);
    const held = await stats(true);
    if (held.connections !== jobs.length * o.jobSize) throw new Error(`the ${o.kind} floor holds ${held.connections} connections, not ${jobs.length * o.jobSize}`);
    const n = held.connections;
    const kbPerConnection = (held.rssBytes - baseline.rssBytes) / n / 1024;
    const heapKbPerConnection = (held.heapUsedBytes - baseline.heapUsedBytes) / n / 1024;
    let cpuMs = 0, wallMs = 0, events = 0;
    const roundMs: number[] = [];
    if (o.kind !== 'ws') {
      await stats(false);
      for (const c of clients) c.send({ type: 'window' });
      for (let w = 0; w < o.windows; w++) {
        await sleep(o.windowMs);
        const s = await stats(false);
        cpuMs += s.cpuMs;
        wallMs += s.wallMs;
        events += s.events;
      }
      for (const c of clients) c.send({ type: 'collect' });
      for (const c of clients) roundMs.push(...(await c.next('samples', 60_000)).roundMs);
    }
    const report: FloorReport = {
      kind: o.kind, connections: n, kbPerConnection: round2(kbPerConnection), heapKbPerConnection: round2(heapKbPerConnection),
      cpuUsPerEvent: events ? round2((cpuMs * 1000) / events) : null, cpuPercent: wallMs ? round2((100 * cpuMs) / wallMs) : null,
      eventsPerSec: wallMs ? round2((1000 * events) / wallMs) : null, roundMs: roundMs.length ? distribution(roundMs) : null, openMs: Math.round(openMs),
    };
    log(`${o.kind} floor: ${n} connections opened in ${(openMs / 1000).toFixed(1)} s; ${report.kbPerConnection} KiB each (RSS after GC), heap ${report.heapKbPerConnection} KiB`
      + (report.cpuUsPerEvent === null ? '' : `; server CPU ${report.cpuPercent}% (${report.cpuUsPerEvent} µs/event, ${report.eventsPerSec} events/s)`)
      + (report.roundMs ? `; whole round p50 ${report.roundMs.p50} p99 ${report.roundMs.p99} ms over ${report.roundMs.count} samples` : ''));
    return report;
  } finally {
    for (const c of clients) c.send({ type: 'exit' });
    server.send({ type: 'exit' });
    await Promise.all([...clients, server].map((c) => c.stopped(5_000)));
  }
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/**
 * Summary keys: the floor's memory and CPU beside the real server's at its largest step held (the
 * server's cpuUsPerEvent pooled over that step's windows), each null when that part did not run.
 */
export function floorSummary(floor: Partial<Record<FloorKind, FloorReport | { error: string }>>, steps: { held: boolean; volunteers: number; server: { cpuUsPerEvent: number } }[]) {
  const ok = (f: FloorReport | { error: string } | undefined) => (f && !('error' in f) ? f : null);
  const sio = ok(floor.socketio), lean = ok(floor.lean), ws = ok(floor.ws);
  const held = steps.filter((s) => s.held).at(-1);
  return {
    /** Bare Socket.IO (the server's options, the same rounds) at floorConnections: RSS per connection after GC, KiB. */
    socketio_floor_kb_per_connection: sio?.kbPerConnection ?? null,
    socketio_floor_heap_kb_per_connection: sio?.heapKbPerConnection ?? null,
    /** Bare Socket.IO's CPU per client event for the same round traffic (µs). */
    socketio_floor_cpu_us_per_event: sio?.cpuUsPerEvent ?? null,
    /** Bare Socket.IO's whole round at floorConnections, pooled over its windows: does the library alone hold the goal's p99 here? */
    socketio_floor_round_p99_ms: sio?.roundMs?.p99 ?? null,
    /** The lean engine (Socket.IO's wire protocol on ws, lean-engine.ts) with the same rounds: RSS per connection after GC, KiB. */
    lean_floor_kb_per_connection: lean?.kbPerConnection ?? null,
    lean_floor_cpu_us_per_event: lean?.cpuUsPerEvent ?? null,
    /** The lean engine's whole round at floorConnections, pooled over its windows. */
    lean_floor_round_p99_ms: lean?.roundMs?.p99 ?? null,
    /** Plain ws connections, idle: RSS per connection after GC, KiB. */
    ws_floor_kb_per_connection: ws?.kbPerConnection ?? null,
    /** The real server's CPU per client event at its largest step held, and that step (to read beside the floor's). */
    server_cpu_us_per_event_largest_held: held?.server.cpuUsPerEvent ?? null,
    largest_held_volunteers: held?.volunteers ?? null,
  };
}
