// What a volunteer runs on its main thread (or in a Node process): the Socket.IO session with the
// server, the ring links to its neighbours, and the job engine (in a Web Worker in browsers). It
// follows the server's round clock: load the global model, do the local work, report ready, run the
// round's collective, report the result, apply it at commit, upload checkpoints when asked.
import { CollectiveError, FrameRouter, Group, HomeRing, ModelShare, Ring, type GroupAverageOptions, type Signaler, type Transport } from '@tabfleet/collective';
import { exchange, groupExchange, groupWire, homeExchange, joinWork, payloadToDense, scalePayload, type LocalWork, type Payload } from '@tabfleet/distributed';
import {
  cappedWeights, HEARTBEAT_MAX_MS, HEARTBEAT_MIN_MS, jobHash, MAX_LINK_PATHS, partRange, PROBE_ROUND_ID, QUANT_BLOCK, realClock, ROUND_DEADLINE_MARGIN_MS, sleepOn, EventPacer,
  type Ack, type Clock, type Assignment,
  type GroupReport, type ReplicaTask, type RoundBegin, type VolunteerEvent,
  type VolunteerEventName, type VolunteerServerEvents, type IceServer,
} from '@tabfleet/protocol';
import type { Socket } from 'socket.io-client';
import { putCheckpoint } from './checkpoint-transfer';
import type { JobEngineInfo } from './job-engine';
import { measurePeers } from './join-probe';
import { ExchangeOverlap } from './overlap';
import { modelFromPeers } from './peer-model';
import type { EngineLike, HoldReason, RuntimeOptions, RuntimeStatus } from './runtime-types';

export type { EngineLike, HoldReason, RuntimeOptions, RuntimeStatus } from './runtime-types';

/** A probe link is signaled as such for this long after the server names it (ms): the joiner may still be loading its model (the server allows a minute). */
const PROBE_LINK_MS = 60_000;

/** How long a ring link may take to open before the member reports itself unreachable. */
const CONNECT_TIMEOUT_MS = 15_000;
/** A work request that failed for a passing reason is sent again after this long. */
const WORK_REQUEST_RETRY_MS = 5_000;

export class VolunteerRuntime {
  readonly status: RuntimeStatus = {
    state: 'connecting', held: [], hidden: false, volunteerId: null, jobId: null, step: 0, seq: 0, roundId: null, peers: [], samplesPerSec: 0,
    bytesSent: 0, bytesReceived: 0, syncs: 0, lastError: null, lastAccuracy: null, memoryPlan: null, downloadedBytes: null,
  };
  private transport: Transport | null = null;
  private assignment: Assignment | null = null;
  private info: JobEngineInfo | null = null;
  private chain: Promise<unknown> = Promise.resolve();
  /** The ring or group of the round in flight. */
  private ring: Ring | Group | HomeRing | null = null;
  /** The last group round's group, open until it commits or aborts: validators (or evidence) need this member's contribution as it went on the wire. */
  private openGroup: { group: Group; roundId: number; contribution: Float32Array; wire: GroupAverageOptions } | null = null;
  /** Redundant recompute tasks the server gave, until their starting model is this member's. */
  private replicaTasks: ReplicaTask[] = [];
  private lastBegin: RoundBegin | null = null;
  private lastWork: LocalWork & { wallMs: number; computeMs: number } = { loss: 0, samples: 0, steps: 0, wallMs: 0, computeMs: 0 };
  /** Paced jobs: the local steps the server gave this tab for its next work (undefined: the job's H). */
  private nextSteps: number | undefined;
  /** Paced LocalSGD and DiLoCo: the time the server gave this tab's next local work (it stops there). */
  private nextBudgetMs: number | undefined;
  /** Bytes this member moved in the round it is finishing (reported with its result). */
  private roundBytes = { sent: 0, received: 0 };
  private stopHeartbeat: (() => void) | null = null;
  private neighbours = new Set<string>();
  /** This sync's contribution, fetched from the engine once (an aborted round re-sends it). */
  private payload: Payload | null = null;
  /** Streaming DiLoCo: the next round's first steps, trained while this round's exchange runs. */
  private readonly overlap = new ExchangeOverlap();
  private starResult: { roundId: number; resolve(data: Float32Array): void; reject(e: Error): void } | null = null;
  private clockOffsetMs = 0;
  private readonly holds = new Set<HoldReason>();
  /** Counts memberships left (holds, lost connections): queued work of an earlier one is dropped. */
  private generation = 0;
  /** Counts model:load events as they arrive: a load the server sent a newer one after is not reported (onModelLoad). */
  private modelLoadsSent = 0;
  /** Bytes of models members sent this tab over their links for its job (counted with the engine's downloads in heartbeats). */
  private peerModelBytes = 0;
  /** Stops the load from members under way (a newer model:load came); the engine stops its own download. */
  private abandonPeerLoad: (() => void) | null = null;
  /** Counts job:end events as they arrive (before their turn in the queue): see queue(). */
  private jobsEnded = 0;
  private stopped = false;
  private signalHandlers = new Set<(from: string, data: unknown) => void>();
  /** Peers linked outside any round (a join probe, either end), whose signaling goes as PROBE_ROUND_ID: peer → job. */
  private readonly probeLinks = new Map<string, string>();
  /** When each probe link stops being signaled as one (cancelled when the tab stops). */
  private readonly probeExpiries = new Map<string, () => void>();
  /** The members this joiner's assignment named, measured once its model is loaded, before `model:loaded`. */
  private joinProbe: { jobId: string; peers: string[] } | null = null;
  /** How often this tab tells the server what it is doing (the worker table): as the server asks (`welcome`, `heartbeat`). */
  private heartbeatMs = HEARTBEAT_MIN_MS;
  /** A commit is being applied: the model of `status.seq` is no longer what the engine holds. */
  private committing = false;
  /** The step of the model of `status.seq`, which a served checkpoint records (`status.step` moves on with local work). */
  private modelStep = 0;

  /** The job's ICE servers, TURN with this tab's current credentials (none outside a job). */
  private iceServers: IceServer[] = [];

  private readonly clock: Clock;
  /** Every event goes out within the server's per-socket budget: one it refused (a `round:ready`) left this tab out of every sync. */
  private readonly pacer: EventPacer;

  constructor(private readonly opts: RuntimeOptions) {
    this.clock = opts.clock ?? realClock;
    this.pacer = new EventPacer(this.clock);
    const s = opts.socket;
    s.on('welcome', (w) => this.onWelcome(w));
    // From the next beat on (one already waiting keeps its time).
    s.on('heartbeat', (h) => (this.heartbeatMs = heartbeatWithin(h.ms)));
    s.on('job:assign', (a) => this.queue('job:assign', () => this.onAssign(a)));
    s.on('model:load', (m) => {
      const load = ++this.modelLoadsSent;
      // On a thin link the older model's bytes would delay the newer one's past its deadline.
      this.abandonPeerLoad?.();
      void Promise.resolve(this.opts.engine.abandonModelLoad?.()).catch(() => {});
      this.queue('model:load', () => this.onModelLoad(m, load));
    });
    s.on('round:begin', (r) => {
      // Sent before the server heard this tab leave (a hold): not this tab's round to run.
      if (this.holds.size) return;
      this.lastBegin = r;
      this.queue('round:begin', () => this.onRoundBegin(r));
    });
    s.on('round:abort', (r) => this.onRoundAbort(r));
    s.on('protocol:error', (e) => this.onProtocolError(e));
    s.on('work:dropped', (w) => this.onWorkDropped(w));
    s.on('round:commit', (c) => this.queue('round:commit', () => this.onCommit(c)));
    s.on('round:validate', (v) => this.queue('round:validate', () => this.onValidate(v)));
    // Kept until the model it starts from is the one this member holds; a tie-break's already is.
    s.on('work:replicate', (t) => {
      this.replicaTasks.push(t);
      this.queue('work:replicate', () => this.runDueReplicas());
    });
    s.on('evidence:request', (e) => void this.onEvidenceRequest(e));
    s.on('star:result', (r) => this.onStarResult(r));
    s.on('checkpoint:request', (r) => this.queue('checkpoint:request', () => this.onCheckpointRequest(r)));
    s.on('signal', (m: { jobId: string; roundId: number; from: string; data: unknown }) => {
      // A joiner probing this member: answer its signaling the same way.
      if (m.roundId === PROBE_ROUND_ID && !this.probeLinks.has(m.from)) this.probedBy(m.from, m.jobId);
      for (const h of this.signalHandlers) h(m.from, m.data);
    });
    s.on('peers:probe', (p) => {
      this.probedBy(p.peer, p.jobId);
      // The link's initiator may be this end (webrtc.ts): open it now, as the joiner does.
      void this.transport?.connect(p.peer).catch(() => {});
    });
    s.on('job:end', (e) => {
      this.jobsEnded++;
      this.queue('job:end', () => this.onJobEnd(e));
    });
    // At once, not queued behind the engine: links opened from now on use the renewed credentials.
    s.on('ice:refresh', (r) => {
      if (r.jobId === this.assignment?.job.id) this.iceServers = r.iceServers;
    });
    s.on('disconnect', () => {
      this.generation++;
      this.ring?.abort('disconnected from the server');
      this.closeGroup();
      this.setStatus({ state: this.stopped ? 'stopped' : 'connecting' });
    });
  }

  private log(line: string): void {
    this.opts.log?.(`[volunteer ${this.status.volunteerId ?? '?'}] ${line}`);
  }

  private setStatus(patch: Partial<RuntimeStatus>): void {
    Object.assign(this.status, patch);
    this.opts.onStatus?.({ ...this.status });
  }

  /** Handlers that touch the engine run one at a time, in arrival order. */
  private queue(what: string, fn: () => Promise<void>): void {
    // Handlers of a membership the tab has since left (a hold, a lost connection) do not run, and
    // their failures are expected: work cut short is not the tab's error. Nor is the failure of a
    // handler queued before the server ended the job (its last work still runs): a tab evicted while
    // it loaded saw its shard download refused, then a model load with no job set up.
    const generation = this.generation, jobsEnded = this.jobsEnded;
    this.chain = this.chain.then(() => (generation === this.generation ? fn() : undefined)).catch((e: unknown) => {
      const message = `${what}: ${(e as Error).message ?? e}`;
      this.log(message);
      if (generation === this.generation && jobsEnded === this.jobsEnded && this.holds.size === 0) this.setStatus({ lastError: message });
    });
  }

  private emit<E extends VolunteerEventName>(name: E, payload: VolunteerEvent<E>): Promise<Ack<Record<string, unknown>>> {
    return this.pacer.sendWithAck(() => this.opts.socket.timeout(30_000).emitWithAck(name, payload));
  }

  private async emitOk<E extends VolunteerEventName>(name: E, payload: VolunteerEvent<E>): Promise<Record<string, unknown>> {
    const ack = await this.emit(name, payload);
    if (!ack.ok) throw new Error(`${name} refused: ${ack.error.code}: ${ack.error.message}`);
    return ack;
  }

  private onWelcome(w: Parameters<VolunteerServerEvents['welcome']>[0]): void {
    this.clockOffsetMs = w.serverTime - this.clock.now();
    // A (re)connection is a new volunteer to the server: new id, new links, and ask for work again.
    this.transport?.close();
    this.neighbours.clear();
    this.probeLinks.clear();
    const signaler: Signaler = {
      send: (to, data) => {
        const probeJob = this.probeLinks.get(to);
        if (probeJob) {
          void this.emit('signal', { jobId: probeJob, roundId: PROBE_ROUND_ID, to, data }).then((a) => !a.ok && this.log(`probe signal to ${to} refused: ${a.error.message}`));
          return;
        }
        const begin = this.lastBegin;
        if (!begin) return;
        void this.emit('signal', { jobId: begin.jobId, roundId: begin.roundId, to, data }).then((a) => !a.ok && this.log(`signal to ${to} refused: ${a.error.message}`));
      },
      onSignal: (h) => {
        this.signalHandlers.add(h);
        return () => this.signalHandlers.delete(h);
      },
    };
    this.iceServers = [];
    this.transport = this.opts.createTransport(w.volunteerId, signaler, () => this.iceServers);
    // The worker table's heartbeat: what this tab is doing, every few seconds.
    this.stopHeartbeat?.();
    this.heartbeatMs = heartbeatWithin(w.heartbeatMs);
    const beat = () => (this.stopHeartbeat = this.clock.after(this.heartbeatMs, () => (this.sendStatus(), beat())));
    beat();
    this.setStatus({ volunteerId: w.volunteerId, state: this.holds.size ? this.heldState() : 'idle', jobId: null });
    if (this.holds.size === 0 && !this.stopped) this.requestWork();
  }

  private sendStatus(): void {
    if (!this.opts.socket.connected || !this.status.jobId) return;
    const s = this.status;
    const state = s.state === 'connecting' || s.state === 'stopped' ? 'idle' : s.state === 'recovering' ? 'paused' : s.state;
    // No ack asked: nothing waits for one, and each is one more write per tab every heartbeat (a refusal still comes
    // back, as `protocol:error`). While it loads, the bytes downloaded so far show the server the load is moving.
    const { hidden, step, samplesPerSec, bytesSent, bytesReceived } = s;
    const send = (downloadedBytes?: number) => this.pacer.send(() => this.opts.socket.emit('status', { state, hidden, step, samplesPerSec, bytesSent, bytesReceived, downloadedBytes }));
    if (state !== 'loading') return send();
    // The engine's downloads (shards, the server's models) and the models members sent over their links.
    const engineBytes = Promise.resolve(this.opts.engine.downloadedBytes?.() ?? 0);
    void engineBytes.then((n) => (this.setStatus({ downloadedBytes: n + this.peerModelBytes }), send(n + this.peerModelBytes)), () => send());
  }

  private requestWork(): void {
    // A server error or no answer can pass (the job's server node went away and another adopts it):
    // asked again later. A refusal for cause (unknown job, rate limit) is shown and not retried.
    const retry = () => this.clock.after(this.opts.workRetryMs ?? WORK_REQUEST_RETRY_MS, () => {
      if (!this.stopped && this.holds.size === 0 && !this.assignment && this.opts.socket.connected) this.requestWork();
    });
    void this.emit('work:request', this.opts.jobId ? { jobId: this.opts.jobId } : {}).then(
      (a) => {
        if (!a.ok) {
          this.setStatus({ lastError: `work:request refused: ${a.error.message}` });
          if (a.error.code === 'internal') retry();
        } else if (!a.assigned) this.log('no job needs workers yet; waiting to be offered one');
      },
      (e) => {
        this.log(`work:request: ${(e as Error).message}`);
        retry();
      },
    );
  }

  private async onAssign(a: Assignment): Promise<void> {
    if (this.holds.size) {
      // Offered work as it stepped out: decline, so the job does not wait for a tab that is not coming.
      await this.emit('leave', { reason: [...this.holds].join(', ') });
      return;
    }
    this.assignment = a;
    this.iceServers = a.iceServers ?? [];
    this.peerModelBytes = 0; // counted for the job, as the engine's downloads are
    this.setStatus({ state: 'loading', jobId: a.job.id, seq: 0, downloadedBytes: null });
    if (a.probePeers?.length) {
      // Links open while the model loads; the pings wait until it is loaded (a busy thread would delay the pongs it measures).
      for (const p of a.probePeers) {
        this.probeLinks.set(p, a.job.id);
        void this.transport?.connect(p).catch(() => {});
      }
      this.joinProbe = { jobId: a.job.id, peers: a.probePeers };
    }
    this.log(`assigned to job ${a.job.id} (${a.job.spec.preset}, ${a.job.spec.strategy}), shard ${a.shard.index}/${a.shard.count}`);
    this.info = await this.opts.engine.setup(a, this.opts.serverUrl);
    const m = this.info.memory;
    const plan = `${m.passes > 1 ? `micro-batches of ${m.microBatch}, ${m.passes} per step` : `the batch of ${m.microBatch} in one pass`}, recompute ${m.recompute ? 'on' : 'off'} (${m.reason})`;
    this.setStatus({ memoryPlan: plan });
    this.log(`step plan: ${plan}`);
  }

  /** `peer` joins and measures this member: its link is signaled as a probe while the server allows it. */
  private probedBy(peer: string, jobId: string): void {
    // Routed now, so the joiner's pings are answered even before this member's first round. (Not from
    // welcome on: a router made that early failed 2 of 7 runs of the diloco late-joiner e2e, cause not found.)
    if (this.transport) FrameRouter.of(this.transport);
    // A joiner the server named this member to (model:load's peers) asks it for the model over this link.
    if (this.transport) ModelShare.of(this.transport).serve((_from, job, seq) => this.servedModel(job, seq));
    this.probeLinks.set(peer, jobId);
    this.probeExpiries.get(peer)?.();
    this.probeExpiries.set(peer, this.clock.after(PROBE_LINK_MS, () => {
      this.probeExpiries.delete(peer);
      if (this.probeLinks.get(peer) === jobId) this.probeLinks.delete(peer);
    }));
  }

  /** Measures the members the assignment named and reports them (join-probe.ts); never fails the join. */
  private async probe(jobId: string, peers: string[]): Promise<void> {
    try {
      const rttMs = await measurePeers(this.transport!, peers, this.opts.joinProbeTimeoutMs, this.clock);
      const ack = await this.emit('peers:rtt', { jobId, rttMs });
      this.log(ack.ok ? `measured ${Object.keys(rttMs).length} of ${peers.length} members at join: ${JSON.stringify(rttMs)}` : `join probe report refused: ${ack.error.message}`);
    } catch (e) {
      this.log(`join probe failed: ${(e as Error).message}`);
    } finally {
      for (const p of peers) this.probeLinks.delete(p);
    }
  }

  /**
   * Loads the model `model:load` names and reports it. The server sends a newer model when a sync
   * commits during a load (a slow link): the older load, queued or done, is then not reported (the
   * server no longer asks for it and would refuse it), one from members is abandoned mid-way (its bytes
   * would crowd out the newer model's), and the newer one follows.
   */
  private async onModelLoad(m: Parameters<VolunteerServerEvents['model:load']>[0], load: number): Promise<void> {
    if (this.holds.size) return; // sent before the server heard this tab leave: not this tab's to load
    const superseded = () => load !== this.modelLoadsSent;
    if (superseded()) return this.log(`the model of sync ${m.seq} is not loaded: the server sent a newer one`);
    this.setStatus({ state: 'loading' });
    this.payload = null;
    await this.overlap.take().catch(() => null); // steps ahead of a model now replaced
    const got = await this.loadJobModel(m, superseded);
    if (!got) return this.log(`the model of sync ${m.seq} is not loaded: the server sent a newer one`);
    if (superseded()) return this.log(`loaded the model of sync ${m.seq}, now superseded: loading the newer one the server sent`);
    const { digest, from } = got;
    if (this.joinProbe) {
      const { jobId, peers } = this.joinProbe;
      this.joinProbe = null;
      await this.probe(jobId, peers);
    }
    const ack = await this.emitOk('model:loaded', { jobId: m.jobId, seq: m.seq, checksum: digest, from });
    if (!ack.admitted) return; // a newer model is on its way
    this.nextSteps = typeof ack.steps === 'number' ? ack.steps : undefined;
    this.nextBudgetMs = typeof ack.budgetMs === 'number' ? ack.budgetMs : undefined;
    this.setStatus({ seq: m.seq, step: m.step });
    this.modelStep = m.step;
    await this.trainThenReady();
  }

  /**
   * The model `model:load` names: from one of the members it names, when one sends the agreed model,
   * else from the server; null when a newer model:load came while members sent it (not loaded).
   */
  private async loadJobModel(m: Parameters<VolunteerServerEvents['model:load']>[0], superseded: () => boolean): Promise<{ digest: string; from: 'server' | { peer: string } } | null> {
    const spec = this.assignment?.job.id === m.jobId ? this.assignment.job.spec : null;
    if (m.peers?.length && m.digest && spec && this.transport) {
      const abandon = new AbortController();
      this.abandonPeerLoad = () => abandon.abort();
      const got = await modelFromPeers(this.transport, { jobId: m.jobId, spec, seq: m.seq, peers: m.peers, digest: m.digest }, {
        link: (peer) => this.probeLinks.set(peer, m.jobId), unlink: (peer) => this.probeLinks.delete(peer), log: (l) => this.log(l), clock: this.clock,
        onBytes: (n) => void (this.peerModelBytes += n), signal: abandon.signal,
      }).finally(() => (this.abandonPeerLoad = null));
      if (superseded()) return null;
      const loaded = got && (await this.opts.engine.loadCheckpoint(got.bytes, m.step));
      if (got && loaded?.digest === m.digest) {
        this.log(`loaded the model of sync ${m.seq} from ${got.peer} (${got.bytes.byteLength} bytes)`);
        return { digest: loaded.digest, from: { peer: got.peer } };
      }
      if (got) this.log(`the model from ${got.peer} loaded with digest ${loaded?.digest}, not ${m.digest}: loading the server's`);
    }
    const fromServer = await this.opts.engine.loadModel(m.url, m.step).catch((e: unknown) => {
      if (superseded()) return null; // abandoned for the newer model
      throw e;
    });
    return fromServer && { digest: fromServer.digest, from: 'server' };
  }

  /** What this member sends a joiner that asks for the model of sync `seq` (collective's ModelShare): the last commit's, or a refusal. */
  private async servedModel(job: number, seq: number): Promise<Uint8Array> {
    const a = this.assignment;
    if (!a || jobHash(a.job.id) !== job) throw new Error('this member is not in that job');
    if (a.job.spec.groupSize !== undefined) throw new Error('members of Moshpit groups hold models of their own groups');
    const { seq: held, state } = this.status;
    const holds = () => !this.committing && this.status.seq === seq && this.status.state !== 'loading' && this.assignment === a;
    if (held !== seq || !holds()) throw new Error(`this member holds the model of sync ${held}${state === 'loading' ? ' (loading a newer one)' : ''}, not of sync ${seq}`);
    const bytes = await this.opts.engine.servedCheckpoint(this.modelStep);
    if (!holds()) throw new Error(`sync ${this.status.seq} committed while the model of sync ${seq} was read`);
    return bytes;
  }

  private async trainThenReady(): Promise<void> {
    const assignment = this.assignment;
    if (!assignment || this.stopped) return;
    if (this.status.step >= (this.info?.targetSteps ?? Infinity)) {
      this.setStatus({ state: 'idle' }); // the job ends with this sync; the server says so next
      return;
    }
    const pause = this.opts.throttleMs?.() ?? 0;
    if (pause > 0) await sleepOn(this.clock, pause);
    if (this.assignment !== assignment || this.stopped) return; // paused or left while resting: no more work
    this.setStatus({ state: 'training' });
    const t0 = this.clock.now();
    // A replicated unit of this member's work: trained as given, so another member can recompute it.
    const own = this.takeReplicaTask((t) => t.role === 'original' && t.unit.seq === this.status.seq);
    const ahead = await this.overlap.take();
    const work = own ? await this.opts.engine.localUnit(own.unit)
      : ahead ? joinWork(ahead, await this.opts.engine.local((this.nextSteps ?? this.info!.stepsPerSync) - ahead.steps))
      : await this.opts.engine.local(this.nextSteps, this.nextBudgetMs);
    const computeMs = this.clock.now() - t0;
    if (own) await this.uploadReplica(own, await this.opts.engine.unitDelta());
    // Compressed and read back now, so the round only moves bytes; kept for re-runs of an aborted round.
    this.payload = await this.opts.engine.payload();
    await this.runDueReplicas();
    const wallMs = this.clock.now() - t0;
    this.lastWork = { ...work, wallMs, computeMs };
    const step = await this.opts.engine.currentStep();
    // Left the job while training (a hold: paused, frozen, on battery): the work is dropped, and the
    // status keeps saying so (held, the steps of the job as it left) rather than 'syncing'.
    if (this.assignment !== assignment) return;
    this.setStatus({ step, samplesPerSec: wallMs > 0 ? (work.samples * 1000) / wallMs : 0, state: 'syncing' });
    // Work that stopped at a budget says how many steps it took: its weight in the sync.
    const took = this.nextBudgetMs !== undefined && !own ? { steps: work.steps } : {};
    // No ack asked, as for round:result: a refusal comes back as `protocol:error`, dropped work as
    // `work:dropped` then `model:load` (which also discards steps taken ahead).
    this.pacer.send(() => this.opts.socket.emit('round:ready', { jobId: assignment.job.id, seq: this.status.seq + 1, step, ...took }));
    if (assignment.job.spec.overlapSteps > 0 && step < (this.info?.targetSteps ?? Infinity)) {
      this.overlap.start(assignment.job.spec.overlapSteps, (steps) => this.opts.engine.local(steps));
    }
  }

  /** The server's answer to an event sent without an ack (`status`, `round:ready`, `round:result`) that it refused. */
  private onProtocolError(e: Parameters<VolunteerServerEvents['protocol:error']>[0]): void {
    this.log(`${e.event} refused: ${e.code}: ${e.message}`);
    // not_member: the job ended (target reached, stopped) while this tab trained; job:end follows.
    if (e.event === 'round:ready' && e.code !== 'not_member' && this.assignment && this.holds.size === 0) {
      this.setStatus({ lastError: `round:ready refused: ${e.code}: ${e.message}` });
    }
  }

  /** Syncs went on without this tab while it trained: its work is dropped and the job's model follows. */
  private onWorkDropped(w: Parameters<VolunteerServerEvents['work:dropped']>[0]): void {
    if (this.holds.size || this.assignment?.job.id !== w.jobId) return; // held or left meanwhile: the status says so
    this.log(`sync ${w.seq} went on without this tab: reloading the job's model`);
    this.setStatus({ state: 'loading' });
  }

  private async onRoundBegin(r: RoundBegin): Promise<void> {
    if (this.lastBegin?.roundId !== r.roundId) return; // superseded while queued
    this.setStatus({ roundId: r.roundId, peers: r.members.filter((m) => m !== this.status.volunteerId), state: 'syncing' });
    // Moshpit groups average parameters: read now, as this member holds them (a failed group's round leaves them as they were).
    let payload = r.grouped ? await this.opts.engine.payload('params') : this.payload ?? (await this.opts.engine.payload());
    // Paced ring rounds: weighted by samples, so this member sends N·w/W times its payload (the mean is
    // then Σ w·x / W). Group rounds and the star pass the weights to their rules instead.
    if (r.steps && r.mode === 'ring') {
      const total = Object.values(r.steps).reduce((a, b) => a + b, 0);
      payload = scalePayload(payload, (r.members.length * (r.steps[this.status.volunteerId!] ?? 0)) / total);
    }
    // An auto job's server may ask for fp16 on the wire (a ring of dense payloads).
    if (r.dtype && r.mode === 'ring' && payload.kind === 'dense') payload = { ...payload, dtype: r.dtype };
    this.roundBytes = { sent: 0, received: 0 };
    let mean: Float32Array;
    let group: GroupReport | undefined;
    let rttMs: Record<string, number> | undefined;
    try {
      if (r.mode === 'star') mean = await this.starExchange(r, payload);
      else ({ mean, group, rttMs } = await this.peerExchange(r, payload));
    } catch (e) {
      if (e instanceof CollectiveError && e.code === 'aborted') return; // the server aborted it; a new round follows
      const code = e instanceof RoundFailure ? e.code : e instanceof CollectiveError && (e.code === 'peer_lost' || e.code === 'deadline' || e.code === 'bad_frame') ? e.code : 'internal';
      this.log(`round ${r.roundId} failed: ${(e as Error).message}`);
      if (this.lastBegin?.roundId === r.roundId) await this.emit('round:failed', { jobId: r.jobId, roundId: r.roundId, code, message: (e as Error).message.slice(0, 500) });
      if (r.mode !== 'star') this.reportLinkPaths(r.jobId);
      return;
    }
    const checksum = await this.opts.engine.prepare(mean, r.grouped ? 'params' : 'delta');
    // As it was when this tab said it was ready (the engine may be training the next round's first steps).
    const step = this.status.step;
    const w = this.lastWork;
    // No ack asked: the server answers a refusal only (`protocol:error`, logged), which spares a
    // server that holds thousands of volunteers one frame per member and round (bench/coordinator).
    const result = {
      jobId: r.jobId, roundId: r.roundId, checksum, step,
      metrics: { loss: Number.isFinite(w.loss) ? w.loss : null, samples: w.samples, wallMs: w.wallMs, computeMs: w.computeMs, bytesSent: this.roundBytes.sent,
        bytesReceived: this.roundBytes.received },
      ...(group ? { group } : {}),
      ...(rttMs && Object.keys(rttMs).length ? { rttMs } : {}),
    };
    this.pacer.send(() => this.opts.socket.emit('round:result', result));
    if (r.mode !== 'star') this.reportLinkPaths(r.jobId);
  }

  /**
   * Tells the server the path each open link took (WebRTC: its selected ICE candidate pair), for the
   * worker table and /metrics. After the round's answer, so reading the stats never delays a sync.
   */
  private reportLinkPaths(jobId: string): void {
    const read = this.transport?.linkPaths?.();
    if (!read) return;
    void read.then(async (links) => {
      if (!links.length) return;
      const ack = await this.emit('links:paths', { jobId, links: links.slice(0, MAX_LINK_PATHS) });
      if (!ack.ok) this.log(`link paths refused: ${ack.error.code}: ${ack.error.message}`);
    }).catch((e: Error) => this.log(`link paths not reported: ${e.message}`));
  }

  /** Removes and returns the first pending replica task that `match`es. */
  private takeReplicaTask(match: (t: ReplicaTask) => boolean): ReplicaTask | null {
    const i = this.replicaTasks.findIndex(match);
    return i < 0 ? null : this.replicaTasks.splice(i, 1)[0];
  }

  /** Recomputes the other members' units that start from the model this member holds now (the last commit). */
  private async runDueReplicas(): Promise<void> {
    for (let t = this.takeReplicaTask((x) => x.role === 'replica' && x.unit.seq === this.status.seq); t; t = this.takeReplicaTask((x) => x.role === 'replica' && x.unit.seq === this.status.seq)) {
      try {
        await this.uploadReplica(t, await this.opts.engine.replicate(t));
      } catch (e) {
        this.log(`replica of unit ${t.unit.unitId} failed: ${(e as Error).message}`);
      }
    }
    // Tasks for models this member no longer holds can never be done.
    this.replicaTasks = this.replicaTasks.filter((x) => x.unit.seq >= this.status.seq);
  }

  private async uploadReplica(t: ReplicaTask, delta: Float32Array): Promise<void> {
    const ack = await this.emit('replica:upload', { jobId: t.jobId, unitId: t.unit.unitId, data: new Uint8Array(delta.buffer, delta.byteOffset, delta.byteLength) });
    if (!ack.ok) this.log(`replica of unit ${t.unit.unitId} refused: ${ack.error.code}: ${ack.error.message}`);
  }

  /** A ring round (trusted jobs: allreduce of the mean) or a group round (untrusted: robust averaging by per-part owners). */
  private async peerExchange(r: RoundBegin, payload: Payload): Promise<{ mean: Float32Array; group?: GroupReport; rttMs: Record<string, number> }> {
    const deadlineMs = Math.max(1_000, r.deadline - this.clockOffsetMs - this.clock.now() - ROUND_DEADLINE_MARGIN_MS);
    // Links to volunteers that left the round are closed (before the new ring or group listens for
    // lost peers); links to members are kept for reuse.
    for (const peer of this.neighbours) if (!r.members.includes(peer)) this.transport!.closeLink(peer, 'no longer in the round');
    const self = this.status.volunteerId!;
    this.closeGroup();
    const opts = { transport: this.transport!, members: r.members, self, jobId: r.jobId, round: r.roundId, deadlineMs, clock: this.clock };
    // Ring rounds by homes (round:begin's `homes`): sum over the home's LAN, its leader speaks in the ring.
    const collective = r.mode === 'group' ? new Group(opts) : r.homes ? new HomeRing({ ...opts, homes: r.homes }) : new Ring(opts);
    const peers = collective instanceof Group ? collective.peers : collective instanceof HomeRing ? collective.linked : [collective.left, collective.right];
    this.ring = collective;
    this.neighbours = new Set([...this.neighbours].filter((p) => r.members.includes(p)).concat(peers.filter((p) => p !== self)));
    let keepOpen = false;
    try {
      try {
        await collective.connect(Math.min(CONNECT_TIMEOUT_MS, deadlineMs));
      } catch (e) {
        if (e instanceof CollectiveError && e.code === 'aborted') throw e;
        throw new RoundFailure('unreachable', `could not open links to ${peers.join(', ')}: ${(e as Error).message}`);
      }
      if (collective instanceof Group) {
        const spec = this.assignment!.job.spec;
        // Paced: weighted by samples in the rule itself (capped at the median weight), not by scaling payloads.
        const combine = { rule: spec.aggregation, trimFraction: spec.trimFraction, ...(r.steps ? { weights: cappedWeights(r.members.map((id) => r.steps![id])) } : {}) };
        const out = await groupExchange(collective, payload, combine);
        this.countBytes(collective.counters.bytesOut, collective.counters.bytesIn);
        this.openGroup = { group: collective, roundId: r.roundId, contribution: out.contribution, wire: groupWire(payload, combine) };
        keepOpen = true;
        return { mean: out.mean, group: { refused: out.refused, digests: out.digests }, rttMs: collective.linkRttMs() };
      }
      const mean = collective instanceof HomeRing ? await homeExchange(collective, payload) : await exchange(collective, payload);
      this.countBytes(collective.counters.bytesOut, collective.counters.bytesIn);
      return { mean, rttMs: collective.linkRttMs() };
    } finally {
      if (!keepOpen) {
        collective.close();
        if (this.ring === collective) this.ring = null;
      }
    }
  }

  private closeGroup(): void {
    const g = this.openGroup;
    if (!g) return;
    this.openGroup = null;
    g.group.close();
    if (this.ring === g.group) this.ring = null;
  }

  /** Sends the named parts of this member's contribution to their validators, and recomputes the parts it validates. */
  private async onValidate(v: Parameters<VolunteerServerEvents['round:validate']>[0]): Promise<void> {
    const g = this.openGroup;
    if (!g || g.roundId !== v.roundId) return;
    const { bytesOut, bytesIn } = g.group.counters;
    try {
      const parts = await g.group.validate(g.contribution, v.checks, g.wire);
      this.countBytes(g.group.counters.bytesOut - bytesOut, g.group.counters.bytesIn - bytesIn);
      if (parts.length) await this.emit('round:validation', { jobId: v.jobId, roundId: v.roundId, parts });
    } catch (e) {
      if (e instanceof CollectiveError && e.code === 'aborted') return;
      const code = e instanceof CollectiveError && (e.code === 'peer_lost' || e.code === 'deadline' || e.code === 'bad_frame') ? e.code : 'internal';
      this.log(`validation of round ${v.roundId} failed: ${(e as Error).message}`);
      if (this.openGroup === g) await this.emit('round:failed', { jobId: v.jobId, roundId: v.roundId, code, message: `validation: ${(e as Error).message}`.slice(0, 500) });
    }
  }

  /** A validator and an owner disagree: this member's contribution to the part settles it (the server holds its digest). */
  private async onEvidenceRequest(e: Parameters<VolunteerServerEvents['evidence:request']>[0]): Promise<void> {
    const g = this.openGroup;
    if (!g || g.roundId !== e.roundId) return;
    const { start, end } = partRange(g.contribution.length, g.group.size, e.part, g.wire.quantized ? QUANT_BLOCK : 1);
    const part = g.contribution.slice(start, end);
    await this.emit('evidence:upload', { jobId: e.jobId, roundId: e.roundId, part: e.part, data: new Uint8Array(part.buffer) });
  }

  private countBytes(sent: number, received: number): void {
    this.roundBytes = { sent: this.roundBytes.sent + sent, received: this.roundBytes.received + received };
    this.setStatus({ bytesSent: this.status.bytesSent + sent, bytesReceived: this.status.bytesReceived + received });
  }

  private async starExchange(r: RoundBegin, payload: Payload): Promise<Float32Array> {
    const dense = payloadToDense(payload, this.info!.length);
    const result = new Promise<Float32Array>((resolve, reject) => (this.starResult = { roundId: r.roundId, resolve, reject }));
    await this.emitOk('star:update', { jobId: r.jobId, roundId: r.roundId, data: new Uint8Array(dense.buffer, dense.byteOffset, dense.byteLength) });
    const mean = await result;
    this.countBytes(dense.byteLength, mean.byteLength);
    return mean;
  }

  private onStarResult(s: Parameters<VolunteerServerEvents['star:result']>[0]): void {
    if (!this.starResult || this.starResult.roundId !== s.roundId) return;
    const bytes = s.data instanceof Uint8Array ? s.data : new Uint8Array(s.data);
    const mean = new Float32Array(bytes.byteLength / 4);
    new Uint8Array(mean.buffer).set(bytes);
    this.starResult.resolve(mean);
    this.starResult = null;
  }

  private onRoundAbort(r: { roundId: number; reason: string }): void {
    this.log(`round ${r.roundId} aborted: ${r.reason}`);
    if (this.ring && this.ring.round === r.roundId) this.ring.abort(r.reason);
    if (this.openGroup?.roundId === r.roundId) this.closeGroup();
    if (this.starResult?.roundId === r.roundId) {
      this.starResult.reject(new CollectiveError('aborted', r.reason));
      this.starResult = null;
    }
    // The prepared result (if any) is dropped; the payload is kept for the re-formed round.
    this.queue('round:abort', async () => {
      await this.opts.engine.discard();
    });
  }

  private async onCommit(c: Parameters<VolunteerServerEvents['round:commit']>[0]): Promise<void> {
    const begin = this.lastBegin;
    if (!begin || begin.roundId !== c.roundId) return;
    this.closeGroup();
    this.committing = true;
    try {
      await this.overlap.settle();
      await this.opts.engine.commit();
      this.payload = null;
      this.nextSteps = c.steps?.[this.status.volunteerId!];
      this.nextBudgetMs = c.budgetMs;
      this.setStatus({ seq: c.seq, step: c.step, syncs: this.status.syncs + 1 });
      this.modelStep = c.step;
    } finally {
      this.committing = false;
    }
    const me = this.status.volunteerId!;
    // The server picks several evaluators for the syncs it evaluates or checkpoints; their digests
    // of the committed model are what a checkpoint of this sync is checked against. Evaluate before
    // uploading: the upload of the last sync ends the job. A checkpoint off the evaluation schedule
    // asks for the checksum alone.
    if (begin.evaluators.includes(me)) {
      const checksum = await this.opts.engine.digest();
      if (begin.checksumOnly) {
        await this.emit('metrics', { jobId: c.jobId, seq: c.seq, checksum, accuracy: null, loss: null });
      } else {
        const ev = await this.opts.engine.evaluate(this.assignment?.job.spec.evalExamples);
        this.setStatus({ lastAccuracy: ev.accuracy });
        await this.emit('metrics', { jobId: c.jobId, seq: c.seq, checksum, accuracy: ev.accuracy, loss: Number.isFinite(ev.loss) ? ev.loss : null });
      }
    }
    if (begin.uploader === me) await this.uploadCheckpoint(c.jobId, c.seq, c.step);
    await this.trainThenReady();
  }

  /** Asked after the last sync, when the first uploader failed: this tab still holds that model. */
  private async onCheckpointRequest(r: { jobId: string; seq: number }): Promise<void> {
    if (this.status.seq !== r.seq || this.status.jobId !== r.jobId) return;
    await this.uploadCheckpoint(r.jobId, r.seq, this.status.step);
  }

  /** The model as a checkpoint over HTTP in chunks: the server hands this uploader a URL and token for its size. */
  private async uploadCheckpoint(jobId: string, seq: number, step: number): Promise<void> {
    const data = await this.opts.engine.checkpoint();
    const ack = await this.emitOk('checkpoint:upload', { jobId, seq, step, bytes: data.byteLength });
    await putCheckpoint(new URL(String(ack.url), this.opts.serverUrl).href, String(ack.token), data, this.clock);
  }

  private async onJobEnd(e: { jobId: string; reason: string }): Promise<void> {
    this.log(`job ${e.jobId} ended: ${e.reason}`);
    this.closeGroup();
    this.assignment = null;
    this.iceServers = [];
    this.setStatus({ state: this.holds.size ? this.heldState() : 'idle', jobId: null, peers: [], roundId: null });
    if (this.holds.size === 0 && !this.stopped) this.clock.after(1_000, () => this.requestWork());
  }

  private heldState(): RuntimeStatus['state'] {
    return this.holds.has('gpu lost') ? 'recovering' : 'paused';
  }

  /**
   * Steps out of the job for `reason`: the leave goes out at once (before a frozen page stops
   * running: the socket sends it synchronously), and the tab asks for no work until every hold is
   * released. `message` is what the server records as why the member left.
   */
  async hold(reason: HoldReason, message: string = reason): Promise<void> {
    const first = this.holds.size === 0;
    this.holds.add(reason);
    if (first) {
      this.generation++;
      this.ring?.abort(message);
      this.closeGroup();
      this.assignment = null;
      this.lastBegin = null;
      this.payload = null;
    }
    // Sent with no job too: the server then stops offering this tab work.
    const leaving = first && this.opts.socket.connected ? this.emit('leave', { reason: message }) : null;
    this.setStatus({ state: this.heldState(), held: [...this.holds], jobId: null, peers: [], roundId: null });
    this.log(`holding (${[...this.holds].join(', ')}): ${message}`);
    await leaving?.catch(() => {});
  }

  /** Lifts a hold; with none left the tab asks for work again (a new assignment, the job's latest model). */
  release(reason: HoldReason): void {
    if (!this.holds.delete(reason)) return;
    this.setStatus({ held: [...this.holds], state: this.holds.size ? this.heldState() : 'idle' });
    if (this.holds.size === 0 && !this.stopped) {
      this.log(`released (${reason}): asking for work`);
      if (this.opts.socket.connected) this.requestWork();
    }
  }

  /** The volunteer's pause button. */
  pause(): Promise<void> {
    return this.hold('paused');
  }

  resume(): void {
    this.release('paused');
  }

  /** The page went to the background or came back: said at once, in the worker table's heartbeat. */
  setHidden(hidden: boolean): void {
    if (this.status.hidden === hidden) return;
    this.setStatus({ hidden });
    this.sendStatus();
  }

  /**
   * The WebGPU device was lost (driver reset, GPU process crash): leave the job, recreate the device
   * with `restart`, then rejoin, which reloads the job's latest model. Three tries, a second apart and more.
   */
  async recoverDevice(reason: string, restart: () => Promise<unknown>): Promise<void> {
    // Calls in flight when the device went failed with it: their errors are this loss, not the tab's.
    this.setStatus({ lastError: null });
    await this.hold('gpu lost', `GPU device lost (${reason})`);
    for (let attempt = 1; ; attempt++) {
      try {
        await restart();
        break;
      } catch (e) {
        this.log(`recreating the GPU device failed (try ${attempt}): ${(e as Error).message}`);
        if (attempt >= 3) {
          this.setStatus({ lastError: `the GPU device was lost (${reason}) and could not be recreated: ${(e as Error).message}` });
          return;
        }
        await sleepOn(this.clock, 1_000 * attempt);
      }
    }
    this.log('GPU device recreated');
    this.release('gpu lost');
  }

  /** Announces departure (pagehide) and closes everything. */
  stop(reason = 'left'): void {
    this.stopped = true;
    this.stopHeartbeat?.();
    for (const cancel of this.probeExpiries.values()) cancel();
    this.probeExpiries.clear();
    this.ring?.abort(reason);
    if (this.opts.socket.connected) this.opts.socket.emit('leave', { reason }, () => {});
    this.transport?.close();
    this.opts.socket.disconnect();
    this.setStatus({ state: 'stopped' });
  }
}

/** The server's heartbeat period, within the protocol's bounds (a server that names none: the fastest). */
const heartbeatWithin = (ms: number | undefined) => Math.min(HEARTBEAT_MAX_MS, Math.max(HEARTBEAT_MIN_MS, Number.isFinite(ms) ? ms! : HEARTBEAT_MIN_MS));

class RoundFailure extends Error {
  constructor(readonly code: 'unreachable' | 'internal', message: string) {
    super(message);
  }
}
