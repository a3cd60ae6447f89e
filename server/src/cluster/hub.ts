// The server's view of all jobs: creates and stops them, routes each volunteer event to the
// coordinator of its job (on this node, or on the node that owns the job), and assigns volunteers to
// jobs by need and capability.
import { randomBytes } from 'node:crypto';
import {
  LIMITS,
  ProtocolError,
  jobSpecSchema,
  type Assignment,
  type ErrorCode,
  type JobSpec,
  type JobSummary,
  type VolunteerEventName,
  type VolunteerEventParsed,
  type WorkerRow,
} from '@tabfleet/protocol';
import { departedRow } from '../credit';
import { JobCoordinator } from '../coordinator/job-coordinator';
import type { CoordinatorDeps, VolunteerInfo } from '../coordinator/types';
import type { JobRecord } from '../store/store';
import type { Cluster, HubCall, HubReply } from './cluster';

/** How often a node re-claims leases and adopts jobs whose owner went away. */
export const OWNERSHIP_SWEEP_MS = 2_000;

export class JobHub {
  private readonly coordinators = new Map<string, JobCoordinator>();
  /** Jobs being created on this node (leased, not yet in `coordinators`): the sweep leaves them alone. */
  private readonly creating = new Set<string>();
  private cancelSweep: (() => void) | null = null;
  /** The sweep under way, if any (close waits for it). */
  private sweeping: Promise<void> | null = null;
  /** Any sweep under way, the periodic one or one a call started (callers share it). */
  private sweepInFlight: Promise<void> | null = null;
  /** Set by close(): nothing is adopted or dispatched any more. */
  private closed = false;

  get closing(): boolean {
    return this.closed;
  }

  constructor(
    private readonly deps: CoordinatorDeps,
    private readonly cluster: Cluster,
    /** Unfinished jobs at once, across the cluster (default LIMITS.maxActiveJobs). */
    private readonly maxActiveJobs: number = LIMITS.maxActiveJobs,
  ) {
    cluster.serve(async (call) => this.serveLocal(call));
  }

  /** Loads unfinished jobs this node can own and keeps leases fresh. */
  async start(): Promise<void> {
    await this.sweep();
    const loop = () => {
      this.cancelSweep = this.deps.clock.after(OWNERSHIP_SWEEP_MS, () => {
        this.sweeping = this.sweep().catch((e) => this.deps.log(`ownership sweep failed: ${(e as Error).message}`)).finally(() => this.cancelSweep && loop());
      });
    };
    loop();
  }

  /**
   * One sweep at a time: callers while one runs share it. Every event for a job nobody holds starts a
   * sweep (dispatch), and in the two-node coordinator bench at 10,000 volunteers the events of one job
   * whose lease had lapsed started hundreds at once, each loading the job's coordinator and checkpoint,
   * until the node ran out of heap (SIGABRT).
   */
  private sweep(): Promise<void> {
    this.sweepInFlight ??= this.sweepOnce().finally(() => {
      this.sweepInFlight = null;
    });
    return this.sweepInFlight;
  }

  private async sweepOnce(): Promise<void> {
    if (this.closed) return;
    const jobs = (await this.deps.store.listJobs()).filter((job) => !isEnded(job) && !this.creating.has(job.id));
    // Every lease renewed (or taken) at once: one after the other, a busy node's renewals of many jobs
    // could outlast the lease.
    const claims = await Promise.all(jobs.map((job) => (this.coordinators.get(job.id)?.ended ? false : this.cluster.claim(job.id))));
    for (const [i, job] of jobs.entries()) {
      const owned = this.coordinators.get(job.id);
      if (owned?.ended) {
        // Its end in the store before its lease goes: else a sweep that read the store before that
        // write landed would find the job running, unowned, and load it again (a stopped job back).
        await owned.flushed();
        this.coordinators.delete(job.id);
        await this.cluster.release(job.id);
        continue;
      }
      if (claims[i]) {
        if (!owned) {
          const loaded = await JobCoordinator.load(job, this.deps);
          // A sweep that ran beside this one (dispatch starts one for a job nobody holds) got there first.
          if (this.coordinators.has(job.id)) {
            loaded.release();
            continue;
          }
          this.coordinators.set(job.id, loaded);
          // Adopted (or resumed): a coordinator that died with its node held the members; they join again.
          await this.cluster.broadcast({ kind: 'job-loaded', jobId: job.id });
        }
      } else if (owned) {
        this.deps.log(`job ${job.id}: lease lost to another node`);
        owned.release();
        this.coordinators.delete(job.id);
      }
    }
  }

  /** Runs `fn` whenever any node creates a job. */
  onJobCreated(fn: (jobId: string) => void): void {
    this.cluster.onBroadcast((m) => m.kind === 'job-created' && fn(m.jobId));
  }

  /** Runs `fn` whenever a node starts a coordinator for an existing job (its members under the old one must join again). */
  onJobLoaded(fn: (jobId: string) => void): void {
    this.cluster.onBroadcast((m) => m.kind === 'job-loaded' && fn(m.jobId));
  }

  /** The jobs this node coordinates that have not ended (/metrics labels series by these). */
  running(): JobCoordinator[] {
    return [...this.coordinators.values()].filter((c) => !c.ended);
  }

  /** Resolves once every store write queued by this node's coordinators has landed. */
  async flushed(): Promise<void> {
    await Promise.all([...this.coordinators.values()].map((c) => c.flushed()));
  }

  async close(): Promise<void> {
    this.closed = true;
    this.cancelSweep?.();
    this.cancelSweep = null;
    // A sweep under way may still adopt a job: its coordinator must be among those released below,
    // or its timers and writes reach the closed Redis clients (the likely source of a CI run's
    // unhandled "The client is closed" after a two-node test).
    await this.sweeping;
    // Timers of a coordinator would otherwise fire into closed sockets and Redis clients, and the
    // disconnects that closing the sockets causes must not reach a coordinator and start new ones.
    const owned = [...this.coordinators];
    this.coordinators.clear();
    for (const [, c] of owned) c.release();
    await Promise.all(owned.map(([, c]) => c.flushed()));
    for (const [id] of owned) await this.cluster.release(id);
  }

  // ---------- researcher operations ----------

  /** `check` refuses what the spec's schema cannot know of (e.g. an upload this server does not have). */
  async createJob(input: unknown, check?: (spec: JobSpec) => Promise<void>): Promise<JobSummary> {
    const parsed = jobSpecSchema.safeParse(input);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new ProtocolError('bad_request', `job spec: ${issue.path.join('.') || 'body'}: ${issue.message}`);
    }
    await check?.(parsed.data);
    const active = (await this.deps.store.listJobs()).filter((j) => !isEnded(j)).length;
    if (active >= this.maxActiveJobs) throw new ProtocolError('capacity', `already ${active} unfinished jobs (limit ${this.maxActiveJobs})`);
    const spec: JobSpec = parsed.data;
    const now = this.deps.clock.now();
    const record: JobRecord = {
      id: `job-${randomBytes(5).toString('hex')}`, name: spec.name ?? `${spec.preset} ${spec.strategy}`, spec, state: 'waiting', createdAt: now, updatedAt: now, seq: 0, step: 0,
    };
    // The lease first: another node's ownership sweep lists the stored jobs and claims any nobody holds,
    // so a job stored before its lease could be adopted there mid-creation (measured: in the two-node
    // coordinator bench half the jobs moved, and their volunteers were told to rejoin).
    if (!(await this.cluster.claim(record.id))) throw new ProtocolError('conflict', `job id ${record.id} is already leased`);
    // And this node's own sweep must not load a second coordinator for it while this one loads.
    this.creating.add(record.id);
    let c: JobCoordinator;
    try {
      await this.deps.store.createJob(record);
      c = await JobCoordinator.load(record, this.deps);
      this.coordinators.set(record.id, c);
    } finally {
      this.creating.delete(record.id);
    }
    this.deps.log(`job ${record.id} created: ${record.name}`);
    await this.cluster.broadcast({ kind: 'job-created', jobId: record.id });
    return c.summary();
  }

  async stopJob(jobId: string, reason = 'stopped by the researcher'): Promise<JobSummary> {
    const record = this.coordinators.has(jobId) ? null : await this.deps.store.getJob(jobId);
    if (record && isEnded(record)) throw new ProtocolError('conflict', `job ${jobId} has already ended (${record.state})`);
    await this.dispatch({ op: 'stop', jobId, reason });
    return this.summary(jobId);
  }

  /** A job as the API shows it: live from its coordinator when it runs, from the store when ended. */
  async summary(jobId: string): Promise<JobSummary> {
    const record = await this.deps.store.getJob(jobId);
    if (!record) throw new ProtocolError('unknown_job', `no job ${jobId}`);
    if (!isEnded(record)) {
      try {
        return (await this.dispatch({ op: 'summary', jobId })) as JobSummary;
      } catch (e) {
        if (!(e instanceof ProtocolError) || e.code !== 'unknown_job') throw e;
      }
    }
    const [latestCheckpoint, latestAccuracy] = await Promise.all([this.deps.store.latestCheckpoint(jobId), this.deps.store.latestAccuracy(jobId)]);
    return { ...record, workers: 0, latestCheckpoint, latestAccuracy };
  }

  async summaries(): Promise<JobSummary[]> {
    const jobs = await this.deps.store.listJobs();
    return Promise.all(jobs.map((j) => this.summary(j.id)));
  }

  /** The worker table: live from the coordinator, or, once the job ended, its stored contributors. */
  async workers(jobId: string): Promise<WorkerRow[]> {
    // A coordinator still on this node (also just after its job ended) has every row in memory.
    const local = this.coordinators.get(jobId);
    if (local) return local.workers();
    const record = await this.deps.store.getJob(jobId);
    if (!record) throw new ProtocolError('unknown_job', `no job ${jobId}`);
    if (!isEnded(record)) {
      try {
        return (await this.dispatch({ op: 'workers', jobId })) as WorkerRow[];
      } catch (e) {
        if (!(e instanceof ProtocolError) || e.code !== 'unknown_job') throw e;
      }
    }
    const contributors = await this.deps.store.contributors(jobId);
    const names = await this.deps.store.displayNames(contributors.map((c) => c.clientId));
    return contributors.map((c) => departedRow(c, names.get(c.clientId), null));
  }

  // ---------- volunteer operations ----------

  /**
   * Puts a volunteer into a job: the named one, or the one that needs workers most (the most short of
   * its minimum, then the fewest workers for its maximum, then the oldest). Null when no job can take it.
   */
  async assign(volunteer: VolunteerInfo, jobId?: string): Promise<Assignment | null> {
    const identity = volunteer.clientId ?? volunteer.volunteerId;
    const v: VolunteerInfo = { ...volunteer, reputation: (await this.deps.store.reputations([identity])).get(identity) ?? null };
    if (jobId) {
      await this.requireJob(jobId);
      return (await this.dispatch({ op: 'join', jobId, volunteer: v })) as Assignment;
    }
    // Jobs on this node first (no calls needed), then jobs other nodes own.
    const local = [...this.coordinators.values()].filter((c) => c.accepts(v)).map((c) => c.summary());
    const remote = !this.cluster.multiNode ? [] : (await this.deps.store.listJobs()).filter((j) => !isEnded(j) && !this.coordinators.has(j.id));
    const remoteSummaries = await Promise.all(remote.map((j) => this.summary(j.id).catch(() => null)));
    for (const candidates of [local, remoteSummaries.filter((j): j is JobSummary => j !== null && !isEnded(j) && j.workers < j.spec.maxWorkers)]) {
      for (const job of inOfferOrder(candidates)) {
        try {
          return (await this.dispatch({ op: 'join', jobId: job.id, volunteer: v })) as Assignment;
        } catch (e) {
          if (!(e instanceof ProtocolError) || (e.code !== 'capacity' && e.code !== 'conflict')) throw e;
        }
      }
    }
    return null;
  }

  leave(jobId: string, volunteerId: string, reason: string): Promise<unknown> {
    return this.dispatch({ op: 'leave', jobId, volunteerId, reason });
  }

  event<E extends VolunteerEventName>(jobId: string, volunteerId: string, name: E, payload: VolunteerEventParsed<E>): Promise<object> {
    return this.dispatch({ op: 'event', jobId, volunteerId, name, payload }) as Promise<object>;
  }

  status(jobId: string, volunteerId: string, status: unknown): Promise<unknown> {
    return this.dispatch({ op: 'status', jobId, volunteerId, status });
  }

  /** The HTTP side refused the download of shard `shard` of the job for now (its address's slots are in use). */
  downloadRefused(jobId: string, shard: number): Promise<unknown> {
    return this.dispatch({ op: 'downloadRefused', jobId, shard });
  }

  // ---------- routing ----------

  private async requireJob(jobId: string): Promise<void> {
    if (!this.coordinators.has(jobId) && !(await this.deps.store.getJob(jobId))) throw new ProtocolError('unknown_job', `no job ${jobId}`);
  }

  private async dispatch(call: HubCall): Promise<unknown> {
    if (this.closed) throw new ProtocolError('internal', `node ${this.cluster.nodeId} is shutting down`);
    let reply: HubReply;
    if (this.coordinators.has(call.jobId)) {
      reply = this.serveLocal(call);
    } else {
      let owner = await this.cluster.ownerOf(call.jobId);
      if (owner === null || owner === this.cluster.nodeId) {
        await this.sweep(); // adopt it if nobody holds it (its node went away)
        owner = this.coordinators.has(call.jobId) ? this.cluster.nodeId : await this.cluster.ownerOf(call.jobId);
      }
      if (owner === null) throw new ProtocolError('unknown_job', `job ${call.jobId} is not running`);
      reply = owner === this.cluster.nodeId ? this.serveLocal(call) : await this.cluster.call(owner, call);
    }
    if (!reply.ok) throw new ProtocolError(reply.error.code as ErrorCode, reply.error.message);
    return reply.value;
  }

  /** Runs a call against a coordinator on this node, answered at once (every volunteer event of a local job comes through here). */
  private serveLocal(call: HubCall): HubReply {
    const c = this.coordinators.get(call.jobId);
    try {
      if (!c) throw new ProtocolError('unknown_job', `job ${call.jobId} is not run by node ${this.cluster.nodeId}`);
      return { ok: true, value: this.apply(c, call) ?? null };
    } catch (e) {
      if (e instanceof ProtocolError) return { ok: false, error: e.toBody() };
      this.deps.log(`job ${call.jobId}: ${call.op} failed: ${(e as Error).stack ?? e}`);
      return { ok: false, error: { code: 'internal', message: 'internal error' } };
    }
  }

  private apply(c: JobCoordinator, call: HubCall): unknown {
    switch (call.op) {
      case 'join': return c.join(call.volunteer as VolunteerInfo);
      case 'leave': return c.leave(call.volunteerId, call.reason);
      case 'event': return c.handle(call.volunteerId, call.name as VolunteerEventName, call.payload as never);
      case 'status': return c.status(call.volunteerId, call.status as never);
      case 'downloadRefused': return c.loads.downloadRefused(call.shard);
      case 'stop': return c.stop(call.reason);
      case 'summary': return c.summary();
      case 'workers': return c.workers();
    }
  }
}

export function isEnded(j: { state: string }): boolean {
  return j.state === 'done' || j.state === 'stopped' || j.state === 'failed';
}

/** Jobs in the order a volunteer is offered them: neediest first, then the oldest. */
export function inOfferOrder(jobs: JobSummary[]): JobSummary[] {
  return [...jobs].sort((a, b) => need(b) - need(a) || a.createdAt - b.createdAt);
}

/** Larger is needier: the most workers short of its minimum first, then the emptiest for its maximum. */
function need(j: JobSummary): number {
  return Math.max(0, j.spec.minWorkers - j.workers) + (1 - j.workers / j.spec.maxWorkers) / 2;
}
