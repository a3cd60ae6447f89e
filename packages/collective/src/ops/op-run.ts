// One collective op in flight on a Ring: its send queue towards the right neighbour (paced by the
// transport's backpressure), its deadline, its promise. Subclasses hold the algorithm.
import { FLAG_LAST, type Frame, type FrameDTypeName, type FrameKindName } from '@tabfleet/protocol';
import { CollectiveError } from '../errors';
import type { Ring } from '../ring';
interface Settle<T> {
  resolve: (v: T) => void;
  reject: (e: CollectiveError) => void;
}

/** A Float32Array over a payload, copying only when it is not 4-byte aligned. */
export function f32View(p: Uint8Array): Float32Array {
  return p.byteOffset % 4 === 0 ? new Float32Array(p.buffer, p.byteOffset, p.byteLength / 4) : new Float32Array(p.slice().buffer);
}
export function u16View(p: Uint8Array): Uint16Array {
  return p.byteOffset % 2 === 0 ? new Uint16Array(p.buffer, p.byteOffset, p.byteLength / 2) : new Uint16Array(p.slice().buffer);
}

/** One collective op in flight: its send queue towards the right neighbour, its deadline, its promise. */
export abstract class OpRun<T> {
  readonly promise: Promise<T>;
  private settle!: Settle<T>;
  done = false;
  private queue: (() => Uint8Array)[] = [];
  private head = 0;
  private pumping = false;
  private cancelDeadline: (() => void) | null = null;
  protected abstract readonly kind: FrameKindName;

  constructor(protected readonly ring: Ring, readonly seq: number, private readonly deadlineMs: number) {
    this.promise = new Promise<T>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    // The caller may drop the promise after a failure; never an unhandled rejection.
    this.promise.catch(() => {});
  }

  begin(): void {
    const late = `${this.kind} op ${this.seq} of round ${this.ring.round} did not finish within ${this.deadlineMs} ms at ${this.ring.self}`;
    this.cancelDeadline = this.ring.clock.after(this.deadlineMs, () => this.fail(new CollectiveError('deadline', late)));
    if (this.ring.size > 1) {
      this.ring.openLinks(this.deadlineMs).then(
        () => this.pump(),
        (e: unknown) => this.fail(e instanceof CollectiveError ? e : new CollectiveError('peer_lost', String(e))),
      );
    }
    try {
      this.start();
    } catch (e) {
      this.fail(e instanceof CollectiveError ? e : new CollectiveError('bad_argument', String(e)));
    }
    this.maybeFinish();
  }

  /** Queue the first sends; finish at once when nothing needs to move. */
  protected abstract start(): void;
  /** Handle one frame of this op from `from` (already matched on job, round and op). */
  protected abstract onData(from: string, frame: Frame): void;
  /** True once everything this member must receive has arrived. */
  protected abstract received(): boolean;
  protected abstract result(): T;

  receive(from: string, frame: Frame): void {
    if (this.done) {
      this.ring.counters.stale++;
      return;
    }
    if (from !== this.ring.left) {
      this.ring.counters.foreign++;
      return;
    }
    if (frame.kind !== this.kind) return this.bad(from, `a ${frame.kind} frame in a ${this.kind} op`);
    try {
      this.onData(from, frame);
    } catch (e) {
      if (e instanceof CollectiveError) this.fail(e);
      else throw e;
    }
    this.maybeFinish();
  }

  protected bad(from: string, what: string): void {
    this.ring.counters.bad++;
    this.fail(new CollectiveError('bad_frame', `${what} (from ${from}, op ${this.seq}, round ${this.ring.round})`, from));
  }

  protected duplicate(): void {
    this.ring.counters.duplicate++;
  }

  /** Queue a frame for the right neighbour; `make` runs when the channel has room. */
  protected enqueue(make: () => Uint8Array): void {
    this.queue.push(make);
    if (!this.pumping) void this.pump();
  }

  protected header(step: number, segment: number, chunk: number, dtype: FrameDTypeName, last: boolean) {
    return { kind: this.kind, dtype, flags: last ? FLAG_LAST : 0, job: this.ring.job, round: this.ring.round, op: this.seq, step, segment, chunk };
  }

  private async pump(): Promise<void> {
    if (this.pumping || this.done || !this.ring.transport.isConnected(this.ring.right)) return;
    this.pumping = true;
    try {
      while (!this.done && this.head < this.queue.length) {
        const make = this.queue[this.head];
        this.queue[this.head++] = null!;
        const bytes = make();
        await this.ring.transport.send(this.ring.right, bytes);
        this.ring.sent(bytes.byteLength);
      }
      this.queue = [];
      this.head = 0;
    } catch (e) {
      this.fail(e instanceof CollectiveError ? e : new CollectiveError('peer_lost', `send to ${this.ring.right} failed: ${String(e)}`, this.ring.right));
    } finally {
      this.pumping = false;
    }
    this.maybeFinish();
  }

  private maybeFinish(): void {
    if (this.done || this.pumping || this.head < this.queue.length || !this.received()) return;
    let value: T;
    try {
      value = this.result();
    } catch (e) {
      this.fail(e instanceof CollectiveError ? e : new CollectiveError('bad_frame', String(e)));
      return;
    }
    this.done = true;
    this.cancelDeadline?.();
    this.settle.resolve(value);
  }

  /** Rejects the op (once) and, with `propagate`, tells the neighbours so the whole ring gives up. */
  fail(err: CollectiveError, propagate = true): void {
    if (this.done) return;
    this.done = true;
    this.cancelDeadline?.();
    this.queue = [];
    this.head = 0;
    if (propagate) this.ring.sendAbort(this.seq, err, null);
    this.settle.reject(err);
  }
}
