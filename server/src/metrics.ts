// /metrics in the Prometheus text format through prom-client, on a registry of this server's own (a
// process may run several servers: tests do), never prom-client's global one. Three kinds of series:
// the event counters of metrics-catalogue.ts, the process and Node runtime metrics prom-client
// collects (on a registry of the process's, below), and gauges and per-job counters read at scrape
// time from the sockets, the store and this node's coordinators.
// Several nodes (Redis): each exports its own; per-job series come from the node that runs the job.
import { JOB_STATES, PATH_KINDS, RELAY_PROTOCOLS, type JobState, type LinkSummary } from '@tabfleet/protocol';
import { readdir } from 'node:fs/promises';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { ABORT_CAUSES, EVICTION_FAULTS, type JobTally } from './coordinator/job-tally';
import { COUNTERS, type Count, type CounterName } from './metrics-catalogue';

export { COUNTERS, type Count, type CounterName } from './metrics-catalogue';

/** What the scrape-time series are read from. */
export interface MetricSources {
  volunteersConnected(): number;
  dashboardsConnected(): number;
  /** Every stored job's state (the whole cluster's, the same on every node). */
  jobStates(): Promise<JobState[]>;
  /** The jobs this node coordinates that have not ended. */
  runningJobs(): readonly { id: string; workerCount: number; tally: JobTally; summary(): { links?: LinkSummary } }[];
}

/**
 * prom-client's runtime gauges that end in `_total` though they are not counters: promtool's lint
 * refuses them, and each is the sum of its unsuffixed gauge's series by type (kept).
 */
const MISNAMED_RUNTIME_GAUGES = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/**
 * prom-client's runtime gauges that walk every connection on the event loop at each scrape: a
 * readdirSync of /proc/self/fd and a list of every handle object. At 10,000 volunteers a scrape held
 * the loop 40-70 ms, a whole-round p99 stall (coordinator bench, CPU profile). The fds are counted
 * on the thread pool instead (below); handles by type are left to nodejs_active_resources, which
 * counts them by type without building their objects.
 */
const LOOP_WALKING_RUNTIME_GAUGES = ['process_open_fds', 'nodejs_active_handles'];

/**
 * The runtime metrics, collected once per process: they describe the process, which its servers
 * share, and prom-client's collectors (a GC observer, an event-loop delay monitor) cannot be stopped,
 * so one set per server would pile up as a process starts and closes servers.
 */
let runtimeRegistry: Registry | null = null;
function runtimeMetrics(): Registry {
  if (!runtimeRegistry) {
    runtimeRegistry = new Registry();
    collectDefaultMetrics({ register: runtimeRegistry });
    for (const name of [...MISNAMED_RUNTIME_GAUGES, ...LOOP_WALKING_RUNTIME_GAUGES]) runtimeRegistry.removeSingleMetric(name);
    if (process.platform === 'linux') openFdsGauge(runtimeRegistry);
  }
  return runtimeRegistry;
}

/** process_open_fds as prom-client names it, its directory listed by libuv's thread pool. */
function openFdsGauge(registry: Registry): void {
  const g: Gauge = new Gauge({
    name: 'process_open_fds', help: 'Number of open file descriptors.', registers: [registry],
    async collect() {
      // Less the descriptor the listing itself holds open.
      const listed = await readdir('/proc/self/fd').catch(() => null);
      if (listed) g.set(listed.length - 1);
    },
  });
}

// `job_id`, not `job`: Prometheus gives every series it scrapes a `job` label of its own (the scrape
// job's name) and would rename ours to `exported_job`.
const PER_JOB = 'Labelled by job_id while this node coordinates the job (waiting or running): its series go when it ends or moves to another node.';

export class ServerMetrics {
  /** This server's own series; the runtime's are added at each scrape. */
  private readonly registry = new Registry();
  private readonly runtime = runtimeMetrics();
  private readonly counters = new Map<CounterName, Counter>();
  /** The counters' values by name and labels, for `get` (prom-client reads them back only asynchronously). */
  private readonly values = new Map<string, number>();

  constructor() {
    for (const [name, spec] of Object.entries(COUNTERS) as [CounterName, (typeof COUNTERS)[CounterName]][]) {
      this.counters.set(name, new Counter({ name: `tabfleet_${name}_total`, help: spec.help, labelNames: spec.labels, registers: [this.registry] }));
    }
  }

  readonly count: Count = (name, labels = {}) => {
    this.counters.get(name)!.inc(labels as Record<string, string>);
    const key = valueKey(name, labels);
    this.values.set(key, (this.values.get(key) ?? 0) + 1);
  };

  /** A counter's value (0 when never counted). */
  get(name: CounterName, labels: Record<string, string> = {}): number {
    return this.values.get(valueKey(name, labels)) ?? 0;
  }

  /** Registers the series read at scrape time (once the sockets, store and coordinators exist). */
  watch(sources: MetricSources): void {
    const registers = [this.registry];
    gauge(registers, 'tabfleet_volunteers_connected', 'Volunteer sockets connected to this node.', [], (g) => g.set(sources.volunteersConnected()));
    gauge(registers, 'tabfleet_dashboards_connected', 'Dashboard sockets connected to this node.', [], (g) => g.set(sources.dashboardsConnected()));
    gauge(registers, 'tabfleet_jobs', 'Jobs by state, as the store has them (the whole cluster\'s: every node reports the same).', ['state'], async (g) => {
      const states = await sources.jobStates();
      for (const state of JOB_STATES) g.set({ state }, states.filter((s) => s === state).length);
    });
    const running = () => sources.runningJobs();
    gauge(registers, 'tabfleet_job_workers', `Members of the job (volunteers that joined it). ${PER_JOB}`, ['job_id'], (g) => {
      for (const j of running()) g.set({ job_id: j.id }, j.workerCount);
    });
    gauge(registers, 'tabfleet_job_links', `The members' WebRTC links by path, each link once: host (same network), srflx (through a NAT's mapping, found by STUN), `
      + `prflx (a mapping learned from a connectivity check), relay (through TURN), the farthest rung either end's selected candidate pair took, as members last reported. ${PER_JOB}`,
    ['job_id', 'path'], (g) => {
      for (const j of running()) {
        const links = j.summary().links;
        for (const path of PATH_KINDS) g.set({ job_id: j.id, path }, links?.byKind[path] ?? 0);
      }
    });
    gauge(registers, 'tabfleet_job_relayed_links', `The job's relayed links by how a relaying end reaches its TURN server (udp, tcp, tls). ${PER_JOB}`,
      ['job_id', 'protocol'], (g) => {
        for (const j of running()) {
          const links = j.summary().links;
          for (const protocol of RELAY_PROTOCOLS) g.set({ job_id: j.id, protocol }, links?.relayProtocols[protocol] ?? 0);
        }
      });
    jobCounter(registers, 'tabfleet_job_rounds_total', `Syncs of the job by outcome (committed, aborted), as GET /api/jobs/:id/rounds records them, since this node took the job. ${PER_JOB}`,
      ['outcome'], running, (t, add) => {
        add({ outcome: 'committed' }, t.rounds.committed);
        add({ outcome: 'aborted' }, t.rounds.aborted);
      });
    jobCounter(registers, 'tabfleet_job_round_aborts_total', `Aborted syncs of the job by reason (${ABORT_CAUSES.join(', ')}). ${PER_JOB}`,
      ['reason'], running, (t, add) => {
        for (const [reason, n] of t.aborts) add({ reason }, n);
      });
    jobCounter(registers, 'tabfleet_job_evictions_total', `Members evicted from the job by fault (${EVICTION_FAULTS.join(', ')}). ${PER_JOB}`,
      ['fault'], running, (t, add) => {
        for (const [fault, n] of t.evictions) add({ fault }, n);
      });
    jobCounter(registers, 'tabfleet_job_exchange_bytes_total',
      `Bytes the members of the job's committed syncs reported sending and receiving in them (the sum of the metric points' bytesSent is the sent side). ${PER_JOB}`,
      ['direction'], running, (t, add) => {
        add({ direction: 'sent' }, t.exchangeBytes.sent);
        add({ direction: 'received' }, t.exchangeBytes.received);
      });
    jobCounter(registers, 'tabfleet_job_checkpoint_bytes_total', `Bytes of the job's checkpoints stored. ${PER_JOB}`, [], running, (t, add) => add({}, t.checkpointBytes));
    jobCounter(registers, 'tabfleet_job_model_loads_total', `Models members loaded and the server admitted, by source (server, or peer over WebRTC). ${PER_JOB}`, ['source'], running,
      (t, add) => Object.entries(t.modelLoads).forEach(([source, n]) => add({ source }, n)));
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  render(): Promise<string> {
    return Registry.merge([this.runtime, this.registry]).metrics();
  }
}

function valueKey(name: string, labels: Record<string, string | undefined>): string {
  return `${name}${JSON.stringify(Object.entries(labels).sort(([a], [b]) => a.localeCompare(b)))}`;
}

/** A gauge set afresh at each scrape (series of jobs that ended are gone with the reset). */
function gauge(registers: Registry[], name: string, help: string, labelNames: string[], fill: (g: Gauge) => void | Promise<void>): void {
  const g: Gauge = new Gauge({
    name, help, labelNames, registers,
    async collect() {
      g.reset();
      await fill(g);
    },
  });
}

/** A counter per running job, read from its coordinator's tally at each scrape. */
function jobCounter(registers: Registry[], name: string, help: string, labelNames: string[], running: MetricSources['runningJobs'],
  fill: (tally: JobTally, add: (labels: Record<string, string>, value: number) => void) => void): void {
  const c: Counter = new Counter({
    name, help, labelNames: ['job_id', ...labelNames], registers,
    collect() {
      c.reset();
      for (const j of running()) fill(j.tally, (labels, value) => c.inc({ job_id: j.id, ...labels }, value));
    },
  });
}
