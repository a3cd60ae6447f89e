// A simulated volunteer for server tests: a real socket.io-client connection that follows the
// protocol with the job model's flat parameter vector (its real layout, padding zero) but no model
// math. "Training" adds a shard-dependent increment; a ring round's result is the members' mean and a
// group round's their robust group average, exchanged through an injected `Exchanger` (exchange.ts):
// the shared in-process `RingOracle` in the server's tests, a Ring of @tabfleet/collective over its
// in-memory network in the soak (the collective does this over WebRTC in real workers); "evaluation"
// is a fixed function of the sync, so honest evaluators agree.
import {
  EventPacer,
  NAMESPACES,
  VOLUNTEER_SOCKET_PATH,
  PROTOCOL_VERSION,
  realClock,
  layoutOf,
  type ModelRef,
  cappedWeights,
  checksumOf,
  encodeSafetensors,
  modelDigest,
  f32Tensor,
  pacedStepCeiling,
  partRange,
  verifyCheckpoint,
  type Ack,
  type Assignment,
  type CapabilitiesInput,
  type GroupReport,
  type JobSpec,
  type PartCheck,
  type PartValidationReport,
  type ReplicaTask,
  type RoundBegin,
  type VolunteerEvent,
  type VolunteerEventName,
} from '@tabfleet/protocol';
import { io, type Socket } from 'socket.io-client';
import { failureCodeOf, type Exchanger, type ExchangeResult, type MemberExchange, type OwnerLie, type RingOracle } from './exchange';
import { partRecompute } from '../coordinator/group-validation';

export * from './exchange';

export const SIM_CAPABILITIES: CapabilitiesInput = {
  backend: 'webgpu',
  adapter: { vendor: 'sim', architecture: 'test', device: 'simulated', description: 'simulated volunteer' },
  limits: { maxStorageBufferBindingSize: 1 << 30, maxBufferSize: 1 << 30 },
  features: [],
};

/** What simulated training of a unit does: deterministic in the unit alone, so every honest member computes the same. */
function trainUnit(params: Float32Array, entries: readonly { offset: number; size: number }[], unit: ReplicaTask['unit']): void {
  for (let s = 0; s < unit.steps; s++) {
    for (const p of entries) for (let i = p.offset; i < p.offset + p.size; i++) params[i] += 0.01 * (unit.shard.index + 1) * Math.cos((unit.batchSeed % 997) + s + i);
  }
}


/** The seeded initial flat vector every member of a job starts from (zero in the layout's padding). */
export function initialParams(model: ModelRef, seed: number): Float32Array {
  const v = new Float32Array(layoutOf(model).length);
  for (const p of layoutOf(model).entries) for (let i = p.offset; i < p.offset + p.size; i++) v[i] = Math.sin(seed * 1000 + i);
  return v;
}

/** A checkpoint of a flat vector in the preset's layout, with strategy `state` tensors if any, as a real worker writes it. */
export function checkpointOf(model: ModelRef, flat: Float32Array, state: Record<string, Float32Array> = {}): Uint8Array {
  const params = layoutOf(model).entries.map((p) => [p.name, f32Tensor(p.shape, flat.slice(p.offset, p.offset + p.size))] as const);
  const extra = Object.entries(state).map(([name, values]) => [name, f32Tensor([values.length], values)] as const);
  return encodeSafetensors(Object.fromEntries([...params, ...extra]));
}

/** What honest simulated evaluators report for a sync's model. */
export function simEvaluation(seq: number): { accuracy: number; loss: number } {
  return { accuracy: Math.min(0.99, 0.5 + seq / 200), loss: 1 / (1 + seq) };
}

export interface SimOptions {
  url: string;
  /** How it exchanges with the round's other members: `exchanger` when given, else this shared oracle (one of them is required). */
  oracle?: RingOracle;
  exchanger?: Exchanger;
  /** Local steps per round before reporting ready (the job's H when absent). */
  stepsPerRound?: number;
  /** Delay before reporting ready, to model training time. */
  trainMs?: number;
  /**
   * Paced jobs: "trains" at this many ms a step, as a worker does: the steps it is given (model:loaded's
   * ack, round:commit), with a budget while half a step still fits it, at most pacedStepCeiling of them,
   * reporting them in `round:ready` and their time as `computeMs`; `claim` changes what it says.
   */
  msPerStep?: number;
  claim?: { steps?: (took: number, given: number, spec: JobSpec) => number; computeMs?: (honest: number) => number };
  capabilities?: CapabilitiesInput;
  /** Sent in the handshake: the identity credit is kept under, and its display name. */
  clientId?: string;
  displayName?: string;
  /** Reconnect after the server goes away (restart tests). */
  reconnect?: boolean;
  /** After `job:end`, ask for work again (as the worker runtime does): it then joins the job anew. */
  rejoin?: boolean;
  /** What it reports when asked to evaluate (default `simEvaluation`; a liar reports something else). */
  evaluate?: (seq: number, params: Float32Array) => { accuracy: number | null; loss: number | null; checksum?: string };
  /** The step it claims in `round:result` (default: its own count, honestly). */
  reportStep?: (step: number) => number;
  /** The digest it reports after loading a model (default: modelDigest of what it loaded). */
  loadedChecksum?: (honest: string) => string;
  /** What it contributes to a ring or group round (default: its parameters; an attacker sends something else). */
  contribution?: (params: Float32Array) => Float32Array;
  /** The group report it sends (default: the honest one; a liar changes digests or refusals). */
  groupReport?: (honest: GroupReport) => GroupReport;
  /** As the owner of a part: what it does to the aggregate, reporting and sending the result to all alike. */
  ownerLie?: OwnerLie;
  /** As a validator: what it reports for a part (default: the honest recomputation). */
  validation?: (honest: PartValidationReport) => PartValidationReport;
  /** What it uploads when asked for evidence of a part (default: what it sent). */
  evidence?: (sent: Float32Array) => Float32Array;
  /** Never answers `round:validate` (a validator that stays silent). */
  silentValidator?: boolean;
  /** What it uploads for a replicated unit, as original or replica (default: the honest delta; faulty hardware or a liar changes it). */
  replica?: (honest: Float32Array, role: ReplicaTask['role']) => Float32Array;
  /** The checkpoint it uploads when it is the uploader (default: its parameters, honestly). */
  checkpoint?: (seq: number, params: Float32Array) => Uint8Array | null;
  /** Waits this long after a checkpoint request before uploading (a slow link: syncs may commit meanwhile). */
  uploadDelayMs?: number;
  /** Reports each evaluation this long after the commit, meanwhile training on (a slow evaluator reading the test set). */
  evaluationDelayMs?: number;
  log?: (line: string) => void;
  /** The loopback address it connects from (127.0.0.x: volunteers behind different addresses). */
  localAddress?: string;
  /** Where it connects: the lean volunteer endpoint (VOLUNTEER_SOCKET_PATH, the runtime's, default) or Socket.IO's path. */
  endpoint?: 'lean' | 'socket.io';
  /** Syncs whose parameters it keeps in `applied` (default 64); long runs keep fewer. */
  appliedKept?: number;
  /** Received events it keeps in `events`, newest (default: all); long runs bound it. */
  eventsKept?: number;
}

/** Syncs whose parameters a volunteer keeps in `applied` unless told otherwise. */
const APPLIED_KEPT = 64;

export class SimVolunteer {
  readonly socket: Socket;
  volunteerId = '';
  assignment: Assignment | null = null;
  params: Float32Array = new Float32Array(0);
  step = 0;
  /** Global model version this volunteer's parameters derive from. */
  baseSeq = -1;
  readonly events: { name: string; payload: unknown; at: number }[] = [];
  readonly committed: number[] = [];
  /** Syncs it uploaded a checkpoint of. */
  readonly uploads: number[] = [];
  /** The parameters each of the last 64 committed syncs left this volunteer with. */
  readonly applied = new Map<number, Float32Array>();
  /** What it loaded: the per-sync checksum (as in round results) and the digest the server checks. */
  loadedFrom: { seq: number; url: string | null; checksum: string; digest: string }[] = [];
  ended: string | null = null;
  /** Every `job:end` reason it got (with `rejoin`, `ended` is cleared as it asks again). */
  readonly endings: string[] = [];
  /** Called when the round begins; return a failure code to report `round:failed` instead of a result. */
  failRound: ((r: RoundBegin) => 'peer_lost' | 'unreachable' | null) | null = null;
  /** The rounds it reported `round:failed` for (its exchange failed or `failRound` said so). */
  readonly failedRounds: number[] = [];
  /** The syncs it reported `round:ready` for, in order. */
  readonly readied: number[] = [];
  /** When it last sent `round:ready` (wall clock): the server hands it new work only after this. */
  lastReadyAt: number | null = null;
  /** When set, the volunteer stops at the barrier (never reports ready). */
  holdReady = false;
  /** When set, it does not report `model:loaded` (a joiner that never loads) until `releaseLoad()`. */
  holdLoad = false;
  private heldLoad: { jobId: string; seq: number } | null = null;
  /** When set, a round that begins is kept open until `releaseRound()`. */
  holdRounds = false;
  private heldRound: RoundBegin | null = null;
  /** Failures inside event handlers (a test asserts there are none). */
  readonly errors: string[] = [];
  private closed = false;
  private pending: { roundId: number; values: Float32Array } | null = null;
  /** What it contributed to the last group round (evidence, if asked). */
  private sent: { roundId: number; values: Float32Array } | null = null;
  /** Parts it validated, by round. */
  readonly validated: { roundId: number; part: number }[] = [];
  /** Replica tasks not yet done (their starting sync not yet committed here), and those done. */
  private replicaTasks: ReplicaTask[] = [];
  readonly replicated: { unitId: string; role: ReplicaTask['role'] }[] = [];
  private readonly opts: SimOptions;
  /** As the worker runtime does: its events go out within the server's per-socket budget, none refused for rate. */
  private readonly pacer = new EventPacer(realClock);
  private readonly exchanger: Exchanger;
  /** Its end of the exchange, under the id the server welcomed it with (a reconnection brings a new one). */
  private member: MemberExchange | null = null;
  /** The round its last `round:begin` named: a failure is reported only for the round still current. */
  private lastBeginId = -1;
  /** Paced (msPerStep): each work's sync, the steps it was given, those it took and those it claimed. */
  readonly pacedWorks: { seq: number; given: number; took: number; claimed?: number }[] = [];
  /** Paced: the steps and budget its next work was given, and the time its last work took (msPerStep). */
  private given: { steps?: number; budgetMs?: number } = {};
  private computeMs = 0;

  constructor(opts: SimOptions) {
    this.opts = opts;
    const exchanger = opts.exchanger ?? opts.oracle;
    if (!exchanger) throw new Error('SimVolunteer needs an exchanger or an oracle');
    this.exchanger = exchanger;
    this.socket = io(`${opts.url}${NAMESPACES.volunteer}`, {
      auth: { protocol: PROTOCOL_VERSION, capabilities: opts.capabilities ?? SIM_CAPABILITIES, clientId: opts.clientId, displayName: opts.displayName },
      transports: ['websocket'],
      ...(opts.endpoint === 'socket.io' ? {} : { path: VOLUNTEER_SOCKET_PATH }),
      ...(opts.localAddress ? { localAddress: opts.localAddress } : {}),
      reconnection: opts.reconnect ?? false,
      reconnectionDelay: 200,
      reconnectionDelayMax: 1000,
    });
    const eventsKept = opts.eventsKept ?? Number.POSITIVE_INFINITY;
    this.socket.onAny((name, payload) => {
      this.events.push({ name, payload, at: Date.now() });
      // Trimmed in batches so a bounded history costs O(1) per event.
      if (this.events.length > 2 * eventsKept) this.events.splice(0, this.events.length - eventsKept);
    });
    this.socket.on('welcome', (w) => {
      this.volunteerId = w.volunteerId;
      // A (re)connection is a new volunteer to the server: a new end of the exchange under its new id.
      this.member?.close('reconnected as a new volunteer');
      this.member = this.exchanger.member(w.volunteerId);
      // After a reconnect the server sees a new volunteer: ask for work again.
      if (this.assignment && !this.ended) this.bg(this.emit('work:request', { jobId: this.assignment.job.id }));
    });
    this.socket.on('job:assign', (a: Assignment) => {
      this.assignment = a;
    });
    this.socket.on('model:load', (m) => this.bg(this.load(m)));
    this.socket.on('round:begin', (r: RoundBegin) => this.bg(this.onBegin(r)));
    this.socket.on('star:result', (s) => this.bg(this.onStarResult(s)));
    this.socket.on('round:abort', (a: { roundId: number; reason: string }) => {
      this.pending = null;
      this.heldRound = null;
      this.member?.abort(a.roundId, a.reason);
    });
    // As the runtime does: a round in flight cannot finish without the server.
    this.socket.on('disconnect', () => this.member?.abort(null, 'disconnected from the server'));
    this.socket.on('round:commit', (c) => this.bg(this.onCommit(c)));
    this.socket.on('round:validate', (v) => this.bg(this.onValidate(v)));
    this.socket.on('work:replicate', (t: ReplicaTask) => {
      this.replicaTasks.push(t);
      this.bg(this.runDueReplicas());
    });
    this.socket.on('evidence:request', (e) => this.bg(this.onEvidenceRequest(e)));
    // Round events go without an ack, as the runtime sends them: a refusal comes back as this event.
    this.socket.on('protocol:error', (e: { event: string; code: string; message: string }) => this.log(`${e.event} refused: ${e.code} ${e.message}`));
    this.socket.on('checkpoint:request', (r) => this.bg(this.upload(r.jobId, r.seq)));
    this.socket.on('job:end', (e: { jobId: string; reason: string }) => {
      this.ended = e.reason;
      this.endings.push(e.reason);
      if (!this.opts.rejoin) return;
      this.pending = null;
      this.heldRound = null;
      setTimeout(() => {
        if (this.closed) return;
        this.ended = null;
        this.bg(this.request(e.jobId));
      }, 200);
    });
  }

  /** Errors in event handlers are logged, and ignored once the test closed the volunteer. */
  private bg(p: Promise<unknown>): void {
    p.catch((e) => {
      if (!this.closed) this.errors.push(`${(e as Error).message}`);
    });
  }

  private log(line: string): void {
    this.opts.log?.(`[sim ${this.volunteerId}] ${line}`);
  }

  /** Resolves once the server has welcomed this volunteer. */
  connected(): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.volunteerId) return resolve();
      this.socket.once('welcome', () => resolve());
      this.socket.once('connect_error', (e) => reject(e));
    });
  }

  emit<E extends VolunteerEventName>(name: E, payload: VolunteerEvent<E>): Promise<Ack<Record<string, unknown>>> {
    return this.pacer.sendWithAck(() => this.socket.timeout(10_000).emitWithAck(name, payload));
  }

  /** An event without an ack (the round events, as the runtime sends them); refusals arrive as `protocol:error`. */
  send<E extends VolunteerEventName>(name: E, payload: VolunteerEvent<E>): void {
    this.pacer.send(() => this.socket.emit(name, payload));
  }

  async request(jobId?: string): Promise<Ack<Record<string, unknown>>> {
    return this.emit('work:request', jobId ? { jobId } : {});
  }

  private get jobId(): string {
    return this.assignment?.job.id ?? '';
  }

  private async load(m: { jobId: string; seq: number; step: number; url: string | null }): Promise<void> {
    const spec = this.assignment?.job.spec;
    if (!spec) throw new Error('model:load before job:assign');
    if (m.url) {
      const res = await fetch(m.url);
      if (!res.ok) throw new Error(`checkpoint download: HTTP ${res.status}`);
      this.params = verifyCheckpoint(spec, new Uint8Array(await res.arrayBuffer())).params;
    } else {
      this.params = initialParams(spec, spec.seed);
    }
    this.step = m.step;
    this.baseSeq = m.seq;
    this.loadedFrom.push({ seq: m.seq, url: m.url, checksum: checksumOf(this.params), digest: modelDigest(this.params) });
    if (this.holdLoad) {
      this.heldLoad = m;
      return;
    }
    await this.reportLoaded(m);
  }

  /** Reports the load `holdLoad` kept back (the model it downloaded last), and goes on as after any load (a later load is held too while `holdLoad` is set). */
  async releaseLoad(): Promise<void> {
    const m = this.heldLoad;
    if (!m) throw new Error('no load is held');
    this.heldLoad = null;
    await this.reportLoaded(m);
  }

  private async reportLoaded(m: { jobId: string; seq: number }): Promise<void> {
    const honest = modelDigest(this.params);
    const ack = await this.emit('model:loaded', { jobId: m.jobId, seq: m.seq, checksum: this.opts.loadedChecksum?.(honest) ?? honest });
    if (ack.ok && ack.admitted) {
      this.given = { steps: ack.steps as number | undefined, budgetMs: ack.budgetMs as number | undefined };
      await this.trainThenReady();
    }
  }

  private async trainThenReady(): Promise<void> {
    const original = (t: ReplicaTask) => t.role === 'original' && t.unit.seq === this.baseSeq;
    // Paced with a pace of its own (not a replicated unit, which it trains as given): the steps that fit its budget.
    const { msPerStep } = this.opts;
    const paced = msPerStep !== undefined && this.given.steps !== undefined && !this.replicaTasks.some(original) ? this.pacedWork(msPerStep, this.given.steps, this.given.budgetMs) : null;
    const trainMs = paced ? (this.computeMs = paced.took * msPerStep!) : this.opts.trainMs;
    if (trainMs) await new Promise((r) => setTimeout(r, trainMs));
    const h = paced?.took ?? this.opts.stepsPerRound ?? this.assignment?.job.spec.H ?? 1;
    const shard = this.assignment?.shard.index ?? 0;
    const entries = this.assignment ? layoutOf(this.assignment.job.spec).entries : [];
    const i = this.replicaTasks.findIndex(original);
    if (i >= 0) {
      // Its work this sync is the unit, so that another member can recompute it.
      const [task] = this.replicaTasks.splice(i, 1);
      const start = this.params.slice();
      trainUnit(this.params, entries, task.unit);
      await this.uploadReplica(task, start, this.params);
    } else {
      // Paced: its steps in one pass (h passes of the 200k-value model, in the server's process, held the
      // server's events long enough that members of unequal steps all looked as slow as the slowest).
      const [passes, by] = paced ? [1, h] : [h, 1];
      for (let s = 0; s < passes; s++) for (const p of entries) for (let i = p.offset; i < p.offset + p.size; i++) this.params[i] += 0.01 * by * (shard + 1) * Math.cos(this.step + i);
    }
    await this.runDueReplicas();
    this.step += h;
    if (this.holdReady || this.ended) return;
    this.readied.push(this.baseSeq + 1);
    this.lastReadyAt = Date.now();
    this.send('round:ready', { jobId: this.jobId, seq: this.baseSeq + 1, step: this.step, ...(paced?.claimed !== undefined ? { steps: paced.claimed } : {}) });
  }

  /** A worker's paced work (engine trainWithin): with a budget, steps while half of one still fits, at most the ceiling, claimed in round:ready. */
  private pacedWork(msPerStep: number, given: number, budgetMs: number | undefined): { took: number; claimed?: number } {
    if (budgetMs === undefined) {
      this.pacedWorks.push({ seq: this.baseSeq + 1, given, took: given });
      return { took: given };
    }
    const spec = this.assignment!.job.spec;
    let took = 1;
    while (took < pacedStepCeiling(given, spec.trust) && took * msPerStep + msPerStep / 2 <= budgetMs) took++;
    const work = { seq: this.baseSeq + 1, given, took, claimed: this.opts.claim?.steps?.(took, given, spec) ?? took };
    this.pacedWorks.push(work);
    return work;
  }

  /** Takes part in the round that was held open (later rounds are held while `holdRounds` is set). */
  releaseRound(): void {
    const r = this.heldRound;
    this.heldRound = null;
    if (r) this.bg(this.participate(r));
  }

  private async onBegin(r: RoundBegin): Promise<void> {
    this.lastBeginId = r.roundId;
    if (this.holdRounds) this.heldRound = r;
    else await this.participate(r);
  }

  private async participate(r: RoundBegin): Promise<void> {
    const failure = this.failRound?.(r) ?? null;
    if (failure) {
      this.failedRounds.push(r.roundId);
      await this.emit('round:failed', { jobId: r.jobId, roundId: r.roundId, code: failure, message: 'simulated' });
      return;
    }
    if (r.mode === 'star') {
      const bytes = new Uint8Array(this.params.slice().buffer);
      const ack = await this.emit('star:update', { jobId: r.jobId, roundId: r.roundId, data: bytes });
      if (!ack.ok) this.log(`star update refused: ${ack.error.message}`);
      return;
    }
    const spec = this.assignment!.job.spec;
    // Paced rounds weigh members by their steps in the rule itself, as the runtime does (the server recomputes disputed parts so).
    const weights = r.steps ? { weights: cappedWeights(r.members.map((id) => r.steps![id])) } : {};
    // Parts cut and aggregates rounded as the job's compression has the runtime do it (quantized: along the scale blocks; any: f16).
    const { block, f16 } = partRecompute(spec);
    const group = r.mode === 'group' ? { rule: spec.aggregation, trimFraction: spec.trimFraction, ...weights, block, f16 } : null;
    const sent = this.opts.contribution?.(this.params.slice()) ?? this.params.slice();
    this.sent = { roundId: r.roundId, values: sent };
    let out: ExchangeResult;
    try {
      if (!this.member) throw new Error('round:begin before welcome');
      out = await this.member.exchange({ jobId: r.jobId, roundId: r.roundId, members: r.members, mode: r.mode, deadline: r.deadline, group, ownerLie: this.opts.ownerLie }, sent);
    } catch (e) {
      // As the worker runtime does: an aborted round is the server's doing and a new one follows;
      // any other failure is reported while the round is still the current one.
      const code = failureCodeOf(e);
      if (code === 'aborted' || this.lastBeginId !== r.roundId || this.closed) return;
      this.failedRounds.push(r.roundId);
      const ack = await this.emit('round:failed', { jobId: r.jobId, roundId: r.roundId, code, message: (e as Error).message.slice(0, 500) });
      if (!ack.ok) this.log(`round failure refused: ${ack.error.message}`);
      return;
    }
    const honest = out.report ?? undefined;
    await this.report(r.jobId, r.roundId, out.mean, honest && (this.opts.groupReport?.(honest) ?? honest), out.bytes);
  }

  /** Recomputes the units that start from the sync it holds now. */
  private async runDueReplicas(): Promise<void> {
    const due = this.replicaTasks.filter((t) => t.role === 'replica' && t.unit.seq === this.baseSeq);
    this.replicaTasks = this.replicaTasks.filter((t) => !due.includes(t) && t.unit.seq >= this.baseSeq);
    for (const task of due) {
      const start = this.applied.get(task.unit.seq);
      if (!start) continue;
      const end = start.slice();
      trainUnit(end, layoutOf(this.assignment!.job.spec).entries, task.unit);
      await this.uploadReplica(task, start, end);
    }
  }

  private async uploadReplica(task: ReplicaTask, start: Float32Array, end: Float32Array): Promise<void> {
    const honest = start.map((v, i) => v - end[i]);
    const delta = this.opts.replica?.(honest, task.role) ?? honest;
    this.replicated.push({ unitId: task.unit.unitId, role: task.role });
    const ack = await this.emit('replica:upload', { jobId: task.jobId, unitId: task.unit.unitId, data: new Uint8Array(delta.buffer, delta.byteOffset, delta.byteLength) });
    if (!ack.ok) this.log(`replica refused: ${ack.error.message}`);
  }

  private async onValidate(v: { jobId: string; roundId: number; checks: PartCheck[] }): Promise<void> {
    const mine = v.checks.filter((c) => c.validator === this.volunteerId);
    if (!this.member || (mine.length > 0 && this.opts.silentValidator)) return;
    let honest: PartValidationReport[];
    try {
      honest = await this.member.validate(v.jobId, v.roundId, v.checks);
    } catch (e) {
      // As the runtime does: a validation that failed for a peer or a deadline fails the round.
      const code = failureCodeOf(e);
      if (code === 'aborted' || this.closed) return;
      const ack = await this.emit('round:failed', { jobId: v.jobId, roundId: v.roundId, code, message: `validation: ${(e as Error).message}`.slice(0, 500) });
      if (!ack.ok) this.log(`validation failure refused: ${ack.error.message}`);
      return;
    }
    if (honest.length === 0) return;
    const parts = honest.map((h) => this.opts.validation?.(h) ?? h);
    for (const p of honest) this.validated.push({ roundId: v.roundId, part: p.part });
    const ack = await this.emit('round:validation', { jobId: v.jobId, roundId: v.roundId, parts });
    if (!ack.ok) this.log(`validation refused: ${ack.error.message}`);
  }

  private async onEvidenceRequest(e: { jobId: string; roundId: number; part: number }): Promise<void> {
    if (!this.sent || this.sent.roundId !== e.roundId) return;
    const r = [...this.events].reverse().find((x) => x.name === 'round:begin' && (x.payload as RoundBegin).roundId === e.roundId)?.payload as RoundBegin;
    const { start, end } = partRange(this.sent.values.length, r.members.length, e.part, partRecompute(this.assignment!.job.spec).block);
    const part = this.sent.values.slice(start, end);
    const values = this.opts.evidence?.(part) ?? part;
    const ack = await this.emit('evidence:upload', { jobId: e.jobId, roundId: e.roundId, part: e.part, data: new Uint8Array(values.buffer, values.byteOffset, values.byteLength) });
    if (!ack.ok) this.log(`evidence refused: ${ack.error.message}`);
  }

  private async onStarResult(s: { jobId: string; roundId: number; data: Uint8Array | ArrayBuffer }): Promise<void> {
    const bytes = s.data instanceof Uint8Array ? s.data : new Uint8Array(s.data);
    const values = new Float32Array(bytes.byteLength / 4);
    new Uint8Array(values.buffer).set(bytes);
    await this.report(s.jobId, s.roundId, values);
  }

  private async report(jobId: string, roundId: number, result: Float32Array, group?: GroupReport, bytes?: { sent: number; received: number }): Promise<void> {
    this.pending = { roundId, values: result.slice() };
    this.send('round:result', {
      jobId, roundId, checksum: checksumOf(result), step: this.opts.reportStep?.(this.step) ?? this.step,
      metrics: {
        loss: 1 / (1 + this.step), samples: 32, wallMs: 10, bytesSent: bytes?.sent ?? result.byteLength, bytesReceived: bytes?.received ?? result.byteLength,
        ...(this.opts.msPerStep !== undefined ? { computeMs: this.opts.claim?.computeMs?.(this.computeMs) ?? this.computeMs } : {}),
      },
      ...(group ? { group } : {}),
    });
  }

  private async onCommit(c: { jobId: string; roundId: number; seq: number; steps?: Record<string, number>; budgetMs?: number }): Promise<void> {
    if (!this.pending || this.pending.roundId !== c.roundId) return;
    this.given = { steps: c.steps?.[this.volunteerId], budgetMs: c.budgetMs };
    this.params = this.pending.values;
    this.pending = null;
    this.baseSeq = c.seq;
    this.committed.push(c.seq);
    this.applied.set(c.seq, this.params.slice());
    // A bounded history: long runs would otherwise hold a model copy per sync.
    for (const seq of this.applied.keys()) if (this.applied.size > (this.opts.appliedKept ?? APPLIED_KEPT)) this.applied.delete(seq);
    const begin = [...this.events].reverse().find((e) => e.name === 'round:begin' && (e.payload as RoundBegin).roundId === c.roundId)?.payload as RoundBegin | undefined;
    // `?.`: a server from before evaluators (the tests' check that they fail on old code) sends none.
    if (begin?.evaluators?.includes(this.volunteerId)) {
      const ev: { accuracy: number | null; loss: number | null; checksum?: string } = this.opts.evaluate?.(c.seq, this.params) ?? simEvaluation(c.seq);
      const report = { jobId: c.jobId, seq: c.seq, checksum: ev.checksum ?? modelDigest(this.params), accuracy: ev.accuracy, loss: ev.loss };
      const send = async () => {
        const ack = await this.emit('metrics', report);
        if (!ack.ok) this.log(`metrics refused: ${ack.error.message}`);
      };
      if (this.opts.evaluationDelayMs) setTimeout(() => void send(), this.opts.evaluationDelayMs);
      else await send();
    }
    if (begin?.uploader === this.volunteerId) await this.upload(c.jobId, c.seq);
    if (!this.ended) await this.trainThenReady();
  }

  private async upload(jobId: string, seq: number): Promise<void> {
    if (this.opts.uploadDelayMs) await new Promise((r) => setTimeout(r, this.opts.uploadDelayMs));
    const data = this.opts.checkpoint ? this.opts.checkpoint(seq, this.params) : checkpointOf(this.assignment!.job.spec, this.params);
    if (!data) return;
    this.uploads.push(seq);
    const ack = await this.emit('checkpoint:upload', { jobId, seq, step: this.step, data });
    if (!ack.ok) this.log(`upload refused: ${ack.error.message}`);
  }

  close(): void {
    this.closed = true;
    this.member?.close('the volunteer closed');
    this.socket.close();
  }
}

/** Polls `check` until it returns a truthy value or `timeoutMs` passes (then throws with `what`). */
export async function waitFor<T>(what: string, check: () => T | Promise<T>, timeoutMs = 10_000, everyMs = 20): Promise<NonNullable<T>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
