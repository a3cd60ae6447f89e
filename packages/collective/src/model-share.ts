// A joiner's model from a member over their link (as hivemind's load_state_from_peers): the joiner
// sends a modelRequest for (job, sync seq), the member answers with the model as modelData frames in
// order, the last one flagged, or with a modelRefuse saying why. This layer moves bytes only: whether
// they are the job's model is the joiner's check against the digest the server agreed, not this one's.
import { FLAG_LAST, MAX_FRAME_PAYLOAD, encodeFrame, jobHash, realClock, type Clock, type Frame } from '@tabfleet/protocol';
import { CollectiveError } from './errors';
import { FrameRouter } from './router';
import type { Transport } from './transport';

/** Models a member sends at once; a further request is refused (the joiner asks another, or the server). */
export const MAX_MODELS_SERVED_AT_ONCE = 2;
/** A transfer with no frame for this long is given up (ms). */
export const MODEL_IDLE_MS = 15_000;
const EMPTY = new Uint8Array(0);
const MAX_REFUSAL_BYTES = 1_000;

/** What a member serves: the checkpoint of sync `seq` of the job hashed to `job`, or an Error saying why not. */
export type ModelProvider = (from: string, job: number, seq: number) => Promise<Uint8Array>;

export interface ModelFetchOptions {
  /** The job's id (sent as its hash) and the sync whose model is asked for. */
  job: string | number;
  seq: number;
  /** More bytes than this fail the transfer (`bad_frame`): a joiner knows how large its model's checkpoint can be. */
  maxBytes: number;
  /** No frame for this long fails it (`deadline`); default MODEL_IDLE_MS. */
  idleMs?: number;
  /** Called with each frame's bytes as they arrive (a joiner's heartbeat shows the server its load moving). */
  onBytes?: (n: number) => void;
}

interface Incoming {
  job: number;
  seq: number;
  maxBytes: number;
  chunks: Uint8Array[];
  bytes: number;
  onBytes?: (n: number) => void;
  resolve(data: Uint8Array): void;
  reject(e: Error): void;
  touch(): void;
}

export class ModelShare {
  private static shares = new WeakMap<Transport, ModelShare>();

  /** The model share of a transport, created on first use (it listens through the transport's router). */
  static of(transport: Transport): ModelShare {
    let s = ModelShare.shares.get(transport);
    if (!s) ModelShare.shares.set(transport, (s = new ModelShare(transport)));
    return s;
  }

  private readonly clock: Clock;
  /** Transfers this end asked for, by the peer asked. */
  private readonly incoming = new Map<string, Incoming>();
  /** Peers this end is sending a model to now. */
  private readonly outgoing = new Set<string>();
  private provider: ModelProvider | null = null;

  private constructor(private readonly transport: Transport) {
    this.clock = transport.clock ?? realClock;
    FrameRouter.of(transport).onModelFrame((from, frame) => this.onFrame(from, frame));
    transport.onPeerLost((peer, reason) => this.incoming.get(peer)?.reject(new CollectiveError('peer_lost', `${peer} left while sending the model: ${reason}`, peer)));
  }

  /** Answers linked peers' requests with `provider` (replacing any before); returns a function that stops serving. */
  serve(provider: ModelProvider): () => void {
    this.provider = provider;
    return () => {
      if (this.provider === provider) this.provider = null;
    };
  }

  /** The model `peer` holds for (job, seq), over the open link to it. Rejects with a CollectiveError. */
  fetch(peer: string, opts: ModelFetchOptions): Promise<Uint8Array> {
    if (this.incoming.has(peer)) return Promise.reject(new CollectiveError('bad_argument', `a model is already coming from ${peer}`));
    const job = jobHash(opts.job);
    return new Promise<Uint8Array>((resolve, reject) => {
      let cancelIdle = () => {};
      const done = () => {
        cancelIdle();
        this.incoming.delete(peer);
      };
      const touch = () => {
        cancelIdle();
        const idleMs = opts.idleMs ?? MODEL_IDLE_MS;
        cancelIdle = this.clock.after(idleMs, () => t.reject(new CollectiveError('deadline', `no model bytes from ${peer} for ${idleMs} ms`, peer)));
      };
      const t: Incoming = {
        job, seq: opts.seq, maxBytes: opts.maxBytes, chunks: [], bytes: 0, onBytes: opts.onBytes, touch,
        resolve: (data) => (done(), resolve(data)),
        reject: (e) => (done(), reject(e)),
      };
      this.incoming.set(peer, t);
      touch();
      this.transport.send(peer, modelFrame('modelRequest', job, opts.seq, 0, 0, EMPTY))
        .catch((e: Error) => t.reject(e instanceof CollectiveError ? e : new CollectiveError('peer_lost', e.message, peer)));
    });
  }

  private onFrame(from: string, frame: Frame): void {
    if (frame.kind === 'modelRequest') return void this.answer(from, frame.job, frame.round);
    const t = this.incoming.get(from);
    // Bytes nobody asked this peer for, or for another model, are dropped.
    if (!t || frame.job !== t.job || frame.round !== t.seq) return;
    if (frame.kind === 'modelRefuse') {
      const why = new TextDecoder().decode(frame.payload.subarray(0, MAX_REFUSAL_BYTES));
      let message = why;
      try {
        message = String((JSON.parse(why) as { message?: unknown }).message ?? why);
      } catch { /* not JSON: shown as sent */ }
      return t.reject(new CollectiveError('aborted', `${from} will not send the model of sync ${t.seq}: ${message}`, from));
    }
    if (frame.chunk !== t.chunks.length) return t.reject(new CollectiveError('bad_frame', `model chunk ${frame.chunk} from ${from} where ${t.chunks.length} was next`, from));
    if (t.bytes + frame.payload.byteLength > t.maxBytes) return t.reject(new CollectiveError('bad_frame', `${from} sent more than the ${t.maxBytes} bytes a checkpoint of this model can have`, from));
    t.chunks.push(frame.payload);
    t.bytes += frame.payload.byteLength;
    t.onBytes?.(frame.payload.byteLength);
    t.touch();
    if (frame.flags & FLAG_LAST) t.resolve(concat(t.chunks, t.bytes));
  }

  /** Sends the asked-for model in order, or a refusal; at most MAX_MODELS_SERVED_AT_ONCE at once, one per peer. */
  private async answer(from: string, job: number, seq: number): Promise<void> {
    const refuse = (message: string) => {
      const why = new TextEncoder().encode(JSON.stringify({ message: message.slice(0, MAX_REFUSAL_BYTES / 2) }));
      return this.transport.send(from, modelFrame('modelRefuse', job, seq, 0, FLAG_LAST, why)).catch(() => {});
    };
    if (!this.provider) return refuse('this member serves no model');
    if (this.outgoing.has(from)) return refuse('a model is already on its way to you');
    if (this.outgoing.size >= MAX_MODELS_SERVED_AT_ONCE) return refuse(`busy sending the model to ${this.outgoing.size} others`);
    this.outgoing.add(from);
    try {
      let data: Uint8Array;
      try {
        data = await this.provider(from, job, seq);
      } catch (e) {
        return await refuse((e as Error).message);
      }
      // Awaited frame by frame: the link's backpressure paces the model.
      for (let i = 0, offset = 0; offset < data.byteLength || i === 0; i++, offset += MAX_FRAME_PAYLOAD) {
        const end = Math.min(offset + MAX_FRAME_PAYLOAD, data.byteLength);
        await this.transport.send(from, modelFrame('modelData', job, seq, i, end === data.byteLength ? FLAG_LAST : 0, data.subarray(offset, end)));
      }
    } catch {
      // The joiner left or its link failed: nothing to tell it.
    } finally {
      this.outgoing.delete(from);
    }
  }
}

function modelFrame(kind: 'modelRequest' | 'modelData' | 'modelRefuse', job: number, seq: number, chunk: number, flags: number, payload: Uint8Array): Uint8Array {
  return encodeFrame({ kind, dtype: 'u8', flags, job, round: seq, op: 0, step: 0, segment: 0, chunk }, payload);
}

function concat(chunks: Uint8Array[], bytes: number): Uint8Array {
  const out = new Uint8Array(bytes);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}
