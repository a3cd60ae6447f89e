// A client process of the coordinator benchmark, forked by bench/coordinator.ts: holds hundreds of
// simulated volunteers, each a connection to /volunteer (a light one speaking socket.io-client's frames,
// light-socket.ts, or socket.io-client itself: behaviour.client) that follows the protocol: welcome → work:request {jobId} → job:assign + model:load (the
// checkpoint fetched over HTTP when the event names one) → model:loaded → (simulated training) →
// round:ready → round:begin → WebRTC signaling with new ring neighbours through the server →
// (simulated allreduce) → round:result → round:commit (the round's uploader PUTs a checkpoint of the
// model's real size over HTTP, as the runtime does) → … plus a `status` heartbeat (without an ack, at the period the server names
// in `welcome` and `heartbeat`, as a tab's runtime sends it; one timer per process drives them all). Lighter than SimVolunteer (no event history,
// no parameter vector, no oracle): a round's result is a fixed checksum, so a process holds ~1000.
//
// Every member of a job lives in the same client process, so the process knows when the job's last
// `round:ready` and last `round:result` were sent and can time both halves of the round as the
// members see them (see WindowSamples in messages.ts).
import { monitorEventLoopDelay } from 'node:perf_hooks';
import {
  NAMESPACES, PRESET_LAYOUTS, PROTOCOL_VERSION, VOLUNTEER_SOCKET_PATH, encodeSafetensors, f32Tensor, realClock, verifyCheckpoint, type Ack, type RoundBegin,
} from '@tabfleet/protocol';
import { io } from 'socket.io-client';
import { putCheckpoint } from '@tabfleet/worker/checkpoint-transfer';
import { SIM_CAPABILITIES } from '@tabfleet/server/testing';
import { lightFetch, warmLightFetch } from './http';
import { LightSocket, type BenchSocket } from './light-socket';
import type { AddResult, ClientBehaviour, FromClient, ToClient, WindowSamples } from './messages';
import { NeighbourLinks, ringNeighbours } from './signaling';

if (!process.send) {
  console.error('forked by bench/coordinator.ts only');
  process.exit(2);
}
const behaviour = JSON.parse(process.argv[2] ?? '') as ClientBehaviour;
const send = (m: FromClient) => process.send?.(m);
// Never outlive the benchmark.
process.on('disconnect', () => process.exit(0));
warmLightFetch();

/** Epoch milliseconds with sub-millisecond resolution (comparable across processes on this machine). */
const now = () => performance.timeOrigin + performance.now();
const uniform = ([lo, hi]: [number, number]) => lo + Math.random() * (hi - lo);
const ACK_TIMEOUT_MS = 30_000;
const RESULT_CHECKSUM = '00c0ffee00c0ffee';
const MAX_ERROR_SAMPLES = 5;
/**
 * The one model every simulated member holds: the bench job's model (mlp-fashion) in its real layout,
 * so the server verifies and stores as many bytes as it would from a real tab. Members report its
 * checksum when they load it and when they evaluate; the uploader sends it. Built once per process.
 */
let model: { bytes: Uint8Array; checksum: string } | null = null;
function theModel(): { bytes: Uint8Array; checksum: string } {
  if (model) return model;
  const tensors = Object.fromEntries(PRESET_LAYOUTS['mlp-fashion'].entries.map((p) => [p.name, f32Tensor(p.shape, new Float32Array(p.size).fill(0.5))]));
  const bytes = encodeSafetensors(tensors);
  return (model = { bytes, checksum: verifyCheckpoint('mlp-fashion', bytes).digest });
}

/** Per job: when each sync's `round:ready` messages were sent, to time the barrier. */
interface JobTrack {
  jobId: string;
  /** The server node this job's members connect to (the node that owns the job). */
  url: string;
  members: Volunteer[];
  /** seq → how many members sent ready for it, and when the last one did. */
  ready: Map<number, { count: number; last: number }>;
  /** roundId → how many members sent round:result for it, when the last one did, and commits received. */
  results: Map<number, { count: number; last: number; commits: number }>;
  /** roundId → receipts of round:begin so far (for the per-round "whole job" figure). */
  begins: Map<number, { seq: number; received: number; lastReady: number; sampled: boolean }>;
  /** Syncs that had a round aborted: the re-formed round is not sampled. */
  aborted: Set<number>;
  committedInWindow: boolean;
}

let stopping = false;
const jobs = new Map<string, JobTrack>();
const volunteers: Volunteer[] = [];

/**
 * Heartbeats of every volunteer of this process from one timer (not one per volunteer): each beats
 * when its next beat is due, every `heartbeatMs` its server named (welcome, then `heartbeat`), the
 * first at a random phase, as a tab does; a new period applies from the beat after the waiting one.
 */
const HEARTBEAT_TICK_MS = 100;
const heartbeats = new Set<Volunteer>();
setInterval(() => {
  const t = now();
  for (const v of heartbeats) if (t >= v.nextBeatAt) v.beat(t);
}, HEARTBEAT_TICK_MS).unref();
const loop = monitorEventLoopDelay({ resolution: 10 });
loop.enable();

function freshWindow() {
  return {
    start: now(), cpu: process.cpuUsage(),
    barrierMs: [] as number[], barrierServerMs: [] as number[], barrierJobMs: [] as number[], deliveryMs: [] as number[], commitMs: [] as number[], roundMs: [] as number[],
    signalsSent: 0, signalsReceived: 0, checkpointsUploaded: 0, checkpointsFetched: 0,
    roundsBegun: 0, roundsCommitted: 0, roundsReformed: 0, roundsAborted: 0, heartbeatsSent: 0, eventsSent: 0, errors: 0, errorSamples: [] as string[],
    disconnects: 0, disconnectReasons: {} as Record<string, number>, jobEnds: 0,
  };
}
let win = freshWindow();

type Tally = 'signalsSent' | 'signalsReceived' | 'checkpointsUploaded' | 'checkpointsFetched';
/** The same counts since the process started (windows reset theirs), for totals per step. */
const totals: Record<Tally, number> = { signalsSent: 0, signalsReceived: 0, checkpointsUploaded: 0, checkpointsFetched: 0 };
function tally(k: Tally): void {
  win[k]++;
  totals[k]++;
}

function error(what: string): void {
  win.errors++;
  if (win.errorSamples.length < MAX_ERROR_SAMPLES) win.errorSamples.push(what);
}

class Volunteer {
  readonly socket: BenchSocket;
  id = '';
  seq = 0;
  step = 0;
  round: RoundBegin | null = null;
  connected = false;
  welcomedAt = 0;
  /** The heartbeat period the server named, and when the next beat is due. */
  heartbeatMs = 0;
  nextBeatAt = Infinity;
  /** The begin half of the current round as this member saw it (ms), when the round is sampled. */
  private beginHalf: { roundId: number; ms: number } | null = null;
  private readonly links = new NeighbourLinks(() => this.id, (to, data) => {
    const r = this.round;
    if (!r) return;
    tally('signalsSent');
    this.emit('signal', { jobId: r.jobId, roundId: r.roundId, to, data });
  });
  private timers = new Set<NodeJS.Timeout>();

  constructor(readonly job: JobTrack, private readonly onAdmitted: (ok: boolean, why: string) => void) {
    const auth = { protocol: PROTOCOL_VERSION, capabilities: SIM_CAPABILITIES };
    const path = behaviour.endpoint === 'lean' ? VOLUNTEER_SOCKET_PATH : '/socket.io/';
    this.socket = behaviour.client === 'light'
      ? new LightSocket({ url: job.url, path, nsp: NAMESPACES.volunteer, auth, connectTimeoutMs: behaviour.joinTimeoutMs })
      : io(`${job.url}${NAMESPACES.volunteer}`, { auth, path, transports: ['websocket'], forceNew: true, reconnection: false, timeout: behaviour.joinTimeoutMs });
    const s = this.socket;
    s.on('connect_error', (e) => this.onAdmitted(false, `connect_error: ${e.message}`));
    s.on('welcome', (w: { volunteerId: string; heartbeatMs: number }) => {
      this.id = w.volunteerId;
      this.heartbeatMs = w.heartbeatMs;
      this.connected = true;
      this.welcomedAt = now();
      this.emit('work:request', { jobId: job.jobId }, (a) => {
        if (!a.ok || !(a as { assigned?: boolean }).assigned) this.onAdmitted(false, `work:request: ${JSON.stringify(a)}`);
      });
    });
    s.on('model:load', (m: { jobId: string; seq: number; step: number; url: string | null }) => {
      this.loadModel(m.url).then(
        () => this.emit('model:loaded', { jobId: m.jobId, seq: m.seq, checksum: theModel().checksum }, (a) => {
          if (!a.ok || !(a as { admitted?: boolean }).admitted) return this.onAdmitted(false, `model:loaded: ${JSON.stringify(a)}`);
          this.seq = m.seq;
          this.step = m.step;
          this.onAdmitted(true, '');
          this.startHeartbeat();
          this.trainThenReady();
        }),
        (e) => this.onAdmitted(false, `model:load: ${(e as Error).message}`),
      );
    });
    s.on('heartbeat', (h: { ms: number }) => (this.heartbeatMs = h.ms));
    s.on('signal', (m: { from: string; data: unknown }) => {
      tally('signalsReceived');
      this.links.onSignal(m.from, m.data);
    });
    s.on('round:begin', (r: RoundBegin) => this.onBegin(r));
    s.on('round:commit', (c: { roundId: number; seq: number; step: number }) => this.onCommit(c));
    s.on('round:abort', (a: { roundId: number }) => {
      win.roundsAborted++;
      this.job.results.delete(a.roundId);
      if (this.round?.roundId === a.roundId) {
        this.job.aborted.add(this.round.seq);
        this.round = null;
        this.beginHalf = null;
      }
    });
    s.on('job:end', (e: { reason: string }) => {
      win.jobEnds++;
      error(`job:end ${e.reason}`);
    });
    s.on('protocol:error', (e: { event: string; code: string; message: string }) => error(`protocol:error ${e.event} ${e.code} ${e.message}`));
    s.on('disconnect', (reason) => {
      this.connected = false;
      this.links.reset();
      this.stopTimers();
      if (!stopping) {
        win.disconnects++;
        win.disconnectReasons[reason] = (win.disconnectReasons[reason] ?? 0) + 1;
        error(`disconnect: ${reason}`);
      }
    });
  }

  private emit(event: string, payload: unknown, then?: (a: Ack) => void): void {
    win.eventsSent++;
    // The round events go without an ack, as a tab's runtime sends them, unless behaviour asks for one.
    if (!then && !behaviour.ackRoundEvents && (event === 'round:ready' || event === 'round:result')) {
      this.socket.emit(event, payload);
      return;
    }
    this.socket.timeout(ACK_TIMEOUT_MS).emit(event, payload, (err: Error | null, a: Ack) => {
      if (err) return error(`${event}: ack timeout`);
      if (!a.ok) error(`${event}: ${a.error.code} ${a.error.message}`);
      then?.(a);
    });
  }

  /** The global model, as a real tab gets it: from the checkpoint URL over HTTP (null: the job's seed). */
  private async loadModel(url: string | null): Promise<void> {
    if (!url) return;
    const res = await fetch(url, { signal: AbortSignal.timeout(behaviour.joinTimeoutMs) });
    if (!res.ok) throw new Error(`checkpoint download: HTTP ${res.status}`);
    verifyCheckpoint('mlp-fashion', new Uint8Array(await res.arrayBuffer()));
    tally('checkpointsFetched');
  }

  private later(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
  }

  private startHeartbeat(): void {
    this.nextBeatAt = now() + Math.random() * this.heartbeatMs;
    heartbeats.add(this);
  }

  /** The worker table's heartbeat, as packages/worker/src/runtime.ts sends it (with an ack callback when `heartbeatAck`). */
  beat(at: number): void {
    this.nextBeatAt = at + this.heartbeatMs;
    win.heartbeatsSent++;
    win.eventsSent++;
    const status = { state: this.round ? 'syncing' : 'training', hidden: false, step: this.step, samplesPerSec: 100, bytesSent: 0, bytesReceived: 0 };
    if (!behaviour.heartbeatAck) return void this.socket.emit('status', status); // refusals come back as `protocol:error`
    this.socket.emit('status', status, (a: Ack) => {
      if (!a.ok) error(`status: ${a.error.code} ${a.error.message}`);
    });
  }

  private trainThenReady(): void {
    this.later(uniform(behaviour.trainMs), () => {
      this.step += 1; // H = 1
      const seq = this.seq + 1;
      let r = this.job.ready.get(seq);
      if (!r) this.job.ready.set(seq, (r = { count: 0, last: 0 }));
      r.count++;
      r.last = now(); // stamped immediately before the send
      this.emit('round:ready', { jobId: this.job.jobId, seq, step: this.step });
    });
  }

  private onBegin(r: RoundBegin): void {
    const at = now();
    this.round = r;
    const job = this.job;
    const ready = job.ready.get(r.seq);
    let b = job.begins.get(r.roundId);
    if (!b) {
      win.roundsBegun++;
      // Sampled only when every member of the job sent its ready for this sync in this process and
      // no earlier round of the sync was aborted (a re-formed round starts from survivors' old readies).
      const clean = !!ready && ready.count === job.members.length && !job.aborted.has(r.seq) && r.members.length === job.members.length;
      if (!clean) win.roundsReformed += job.aborted.has(r.seq) ? 1 : 0;
      b = { seq: r.seq, received: 0, lastReady: ready?.last ?? 0, sampled: clean };
      job.begins.set(r.roundId, b);
      if (clean) {
        const serverBegan = r.began;
        win.barrierServerMs.push(serverBegan - b.lastReady);
        win.deliveryMs.push(at - serverBegan);
      }
    }
    b.received++;
    this.beginHalf = null;
    if (b.sampled) {
      win.barrierMs.push(at - b.lastReady);
      this.beginHalf = { roundId: r.roundId, ms: at - b.lastReady };
      if (b.received === r.members.length) win.barrierJobMs.push(at - b.lastReady);
    }
    if (b.received === r.members.length) job.begins.delete(r.roundId);
    const allreduce = () => this.later(uniform(behaviour.allreduceMs), () => this.sendResult(r));
    // A ring member first links to new neighbours through the server (a star member sends no signals).
    if (r.mode === 'ring') this.links.connect(ringNeighbours(r.members, this.id), allreduce);
    else allreduce();
  }

  private sendResult(r: RoundBegin): void {
    if (this.round?.roundId !== r.roundId) return;
    let res = this.job.results.get(r.roundId);
    if (!res) this.job.results.set(r.roundId, (res = { count: 0, last: 0, commits: 0 }));
    res.count++;
    res.last = now(); // stamped immediately before the send
    this.emit('round:result', {
      jobId: r.jobId, roundId: r.roundId, checksum: RESULT_CHECKSUM, step: this.step,
      metrics: { loss: 1 / (1 + this.step), samples: 32, wallMs: 10, bytesSent: 0, bytesReceived: 0 },
    });
  }

  private onCommit(c: { roundId: number; seq: number }): void {
    const at = now();
    const r = this.round;
    if (!r || r.roundId !== c.roundId) return;
    this.round = null;
    // The commit half: sampled when every member of the job sent its result for this round here.
    const res = this.job.results.get(c.roundId);
    if (res) {
      if (res.count === r.members.length && r.members.length === this.job.members.length) {
        win.commitMs.push(at - res.last);
        if (this.beginHalf?.roundId === c.roundId) win.roundMs.push(this.beginHalf.ms + at - res.last);
      }
      if (++res.commits === r.members.length) this.job.results.delete(c.roundId);
    }
    this.beginHalf = null;
    this.seq = c.seq;
    const job = this.job;
    job.ready.delete(c.seq);
    job.aborted.delete(c.seq);
    if (r.members[0] === this.id) {
      win.roundsCommitted++;
      job.committedInWindow = true;
    }
    // The job checkpoints at its default interval: the round's uploader sends the model, and the
    // server holds the next round until the file is stored.
    // Evaluators vouch for the model's checksum (the server checks the upload against it).
    if (r.evaluators.includes(this.id)) this.emit('metrics', { jobId: r.jobId, seq: c.seq, checksum: theModel().checksum, accuracy: 0.5, loss: 1 });
    if (r.uploader === this.id) this.uploadCheckpoint(r.jobId, c.seq);
    this.trainThenReady();
  }

  /**
   * As the runtime uploads (packages/worker/src/runtime.ts): the event names the checkpoint's size, its
   * ack hands back a URL and token, and the file is PUT there by the runtime's own `putCheckpoint`
   * (its requests made on node:http, `lightFetch`).
   * (The event used to carry the model itself, a path the runtime no longer takes: the server was
   * measured receiving 800 KiB Socket.IO attachments no tab sends.)
   */
  private uploadCheckpoint(jobId: string, seq: number): void {
    const data = theModel().bytes;
    this.emit('checkpoint:upload', { jobId, seq, step: this.step, bytes: data.byteLength }, (a) => {
      if (!a.ok) return;
      const { url, token } = a as { url?: unknown; token?: unknown };
      putCheckpoint(new URL(String(url), this.job.url).href, String(token), data, realClock, lightFetch).then(
        () => tally('checkpointsUploaded'),
        (e: unknown) => error(`checkpoint upload: ${(e as Error).message}`),
      );
    });
  }

  private stopTimers(): void {
    heartbeats.delete(this);
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  close(): void {
    this.stopTimers();
    this.socket.close();
  }
}

/** Opens `count` volunteers per job, `connectConcurrency` at a time; resolves when all are admitted or failed. */
async function add(wanted: { jobId: string; count: number; url: string }[], rampTimeoutMs: number): Promise<AddResult> {
  const t0 = now();
  const deadline = t0 + rampTimeoutMs;
  const queue: JobTrack[] = [];
  for (const { jobId, count, url } of wanted) {
    const job: JobTrack = { jobId, url, members: [], ready: new Map(), results: new Map(), begins: new Map(), aborted: new Set(), committedInWindow: false };
    jobs.set(jobId, job);
    for (let i = 0; i < count; i++) queue.push(job);
  }
  const result: AddResult = { type: 'added', requested: queue.length, admitted: 0, failed: 0, failures: [], welcomeMs: [], admitMs: [], ms: 0 };
  let next = 0;
  const one = () =>
    new Promise<void>((resolve) => {
      const job = queue[next++];
      const started = now();
      let settled = false;
      // Registered before connecting: the job's barrier counts all its members.
      let v: Volunteer | null = null;
      const done = (ok: boolean, why: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (ok) {
          result.admitted++;
          result.welcomeMs.push(v!.welcomedAt - started);
          result.admitMs.push(now() - started);
        } else {
          result.failed++;
          if (result.failures.length < MAX_ERROR_SAMPLES) result.failures.push(why);
        }
        resolve();
      };
      const timer = setTimeout(() => done(false, `not admitted within ${behaviour.joinTimeoutMs} ms`), behaviour.joinTimeoutMs);
      v = new Volunteer(job, done);
      job.members.push(v);
      volunteers.push(v);
    });
  const lanes = Array.from({ length: Math.min(behaviour.connectConcurrency, queue.length) }, async () => {
    while (next < queue.length && now() < deadline) await one();
  });
  await Promise.all(lanes);
  if (next < queue.length) {
    result.failed += queue.length - next;
    result.failures.push(`${queue.length - next} never tried: the ramp's ${rampTimeoutMs} ms ran out`);
  }
  result.ms = now() - t0;
  return result;
}

function collect(): WindowSamples {
  const cpu = process.cpuUsage(win.cpu);
  let progressing = 0;
  for (const j of jobs.values()) {
    if (j.committedInWindow) progressing++;
    j.committedInWindow = false;
  }
  const s: WindowSamples = {
    type: 'samples', windowMs: now() - win.start,
    barrierMs: win.barrierMs, barrierServerMs: win.barrierServerMs, barrierJobMs: win.barrierJobMs, deliveryMs: win.deliveryMs, commitMs: win.commitMs, roundMs: win.roundMs,
    signalsSent: win.signalsSent, signalsReceived: win.signalsReceived, checkpointsUploaded: win.checkpointsUploaded, checkpointsFetched: win.checkpointsFetched,
    totals: { ...totals },
    roundsBegun: win.roundsBegun, roundsCommitted: win.roundsCommitted, roundsReformed: win.roundsReformed, roundsAborted: win.roundsAborted,
    heartbeatsSent: win.heartbeatsSent, eventsSent: win.eventsSent, errors: win.errors, errorSamples: win.errorSamples,
    disconnects: win.disconnects, disconnectReasons: win.disconnectReasons, jobEnds: win.jobEnds,
    connected: volunteers.filter((v) => v.connected).length, jobsProgressing: progressing, jobs: jobs.size,
    loopDelayP99Ms: loop.percentile(99) / 1e6, loopDelayMaxMs: loop.max / 1e6, cpuMs: (cpu.user + cpu.system) / 1000,
  };
  return s;
}

process.on('message', (m: ToClient) => {
  switch (m.type) {
    case 'add':
      add(m.jobs, m.rampTimeoutMs).then(send, (e) => send({ type: 'fatal', message: (e as Error).stack ?? String(e) }));
      break;
    case 'window':
      win = freshWindow();
      for (const j of jobs.values()) j.committedInWindow = false;
      loop.reset();
      break;
    case 'collect':
      send(collect());
      break;
    case 'stop':
      stopping = true;
      for (const v of volunteers) v.close();
      setTimeout(() => process.exit(0), 200).unref();
      break;
  }
});
send({ type: 'started', pid: process.pid });
