// Collectives over a ring of members, each linked to its left and right neighbour by a Transport.
// This file is the Ring: its neighbours and its ops; ordering ops, routing frames, aborts and lost
// peers are the Collective's (collective.ts). Each op's algorithm is an OpRun in ops/ (allreduce.ts,
// gather.ts).
//
// allreduce (bandwidth-optimal): the vector is cut into N segments; N−1 reduce-scatter steps then
// N−1 allgather steps, each segment cut into ≤ 64 KiB frames that are forwarded as soon as they
// arrive (pipelined), so each member sends 2(N−1)/N·S bytes. Global step g: member r sends segment
// (r−g) mod N while g ≤ N−2 (reduce-scatter), then (r+1−(g−N+1)) mod N (allgather); what arrives
// at step g is processed and goes out as step g+1. The owner of a fully reduced segment finalizes
// it (mean, fp16 rounding) before it goes round, so every member ends with identical bytes.
//
// allgather / sparse allgather / broadcast forward each member's (variable-length) contribution
// around the ring; the last chunk of a segment carries FLAG_LAST.
//
// Failure semantics: an op rejects with a CollectiveError on deadline, lost member, abort or bad
// frame; it never touches the caller's arrays, so nothing partial is applied. A member that fails an
// op sends an abort frame both ways round the ring (each member forwards it once), so members far
// from the failure reject promptly too. Frames of other rounds/ops and duplicates are counted and
// dropped, never added.
import { QUANT_FORMATS, quantizedBytes, roundToF16 } from '@tabfleet/protocol';
import { CollectiveError } from './errors';
import { Collective } from './collective';
import { AllreduceRun } from './ops/allreduce';
import { DenseGatherRun, SparseGatherRun } from './ops/gather';
import { QuantizedGatherRun } from './ops/quantized-gather';
import type { AllgatherOptions, AllreduceOptions, QuantizedAllgatherOptions, RingOptions, SparseAllgatherOptions } from './ring-types';
import { sortedPairs } from './sparse-codec';

export * from './ring-types';

export class Ring extends Collective {
  readonly left: string;
  readonly right: string;
  /** @internal */ readonly maxSegmentBytes: number;

  constructor(opts: RingOptions) {
    if (opts.members.length > 0xffff) throw new CollectiveError('bad_argument', `at most 65535 members, got ${opts.members.length}`);
    super(opts, 'ring');
    this.left = this.members[(this.rank - 1 + this.size) % this.size];
    this.right = this.members[(this.rank + 1) % this.size];
    this.maxSegmentBytes = opts.maxSegmentBytes ?? 1024 * 1024 * 1024;
    this.listen();
  }

  get linked(): string[] {
    return this.size === 1 ? [] : [...new Set([this.left, this.right])];
  }

  protected relaysAborts(): boolean {
    return true;
  }

  /** Sum (or mean) of every member's `data`, returned as a new array; `data` is never modified. All members pass the same length. */
  allreduce(data: Float32Array, opts: AllreduceOptions = {}): Promise<Float32Array> {
    const dtype = opts.dtype ?? 'f32';
    const op = opts.op ?? 'sum';
    checkDType(dtype);
    if (op !== 'sum' && op !== 'mean') throw new CollectiveError('bad_argument', `op must be sum or mean, got ${String(op)}`);
    return this.schedule(opts.deadlineMs, (seq, deadline) => new AllreduceRun(this, seq, deadline, data, op, dtype));
  }

  /** Every member's `data` (lengths may differ), indexed like `members`. */
  allgather(data: Float32Array, opts: AllgatherOptions = {}): Promise<Float32Array[]> {
    const dtype = opts.dtype ?? 'f32';
    checkDType(dtype);
    return this.schedule(opts.deadlineMs, (seq, deadline) => new DenseGatherRun(this, seq, deadline, 'allgather', dtype, data, null));
  }

  /** `root`'s data at every member (e.g. a late joiner fetching the model): root passes it, the others pass null. */
  broadcast(root: string, data: Float32Array | null, opts: AllgatherOptions = {}): Promise<Float32Array> {
    const dtype = opts.dtype ?? 'f32';
    checkDType(dtype);
    if (!this.members.includes(root)) throw new CollectiveError('bad_argument', `broadcast root ${root} is not a member`);
    if ((root === this.self) !== (data !== null)) throw new CollectiveError('bad_argument', 'the root passes the data, every other member passes null');
    return this.schedule(opts.deadlineMs, (seq, deadline) => new DenseGatherRun(this, seq, deadline, 'broadcast', dtype, data, root)).then((r) => r[0]);
  }

  /**
   * Sum (or mean) of every member's block-quantized vector (`bytes` from protocol's encodeQuantized, or
   * QuantizedFeedback) as a dense Float32Array: the bytes go round the ring and every member decodes and
   * adds them in ring order, its own included, so all members get identical bytes.
   */
  quantizedAllgather(bytes: Uint8Array, opts: QuantizedAllgatherOptions): Promise<Float32Array> {
    if (!QUANT_FORMATS.includes(opts.format)) throw new CollectiveError('bad_argument', `format must be one of ${QUANT_FORMATS.join(', ')}, got ${String(opts.format)}`);
    if (!Number.isInteger(opts.length) || opts.length < 0) throw new CollectiveError('bad_argument', `length must be a non-negative integer, got ${opts.length}`);
    const want = quantizedBytes(opts.length, opts.format);
    if (bytes.byteLength !== want) throw new CollectiveError('bad_argument', `${bytes.byteLength} bytes for ${opts.length} ${opts.format} values: want ${want}`);
    const op = opts.op ?? 'sum';
    if (op !== 'sum' && op !== 'mean') throw new CollectiveError('bad_argument', `op must be sum or mean, got ${String(op)}`);
    return this.schedule(opts.deadlineMs, (seq, deadline) => new QuantizedGatherRun(this, seq, deadline, bytes, opts.length, opts.format, op));
  }

  /**
   * Sum (or mean) of every member's sparse vector (indices into a dense vector of `length`, values),
   * as a dense Float32Array. The (index, value) lists go round the ring (N−1 steps) and every member
   * adds them up locally in ring order, so all members get identical bytes.
   */
  sparseAllgather(indices: Uint32Array, values: Float32Array, opts: SparseAllgatherOptions): Promise<Float32Array> {
    const dtype = opts.dtype ?? 'f32';
    checkDType(dtype);
    if (indices.length !== values.length) throw new CollectiveError('bad_argument', `${indices.length} indices but ${values.length} values`);
    if (!Number.isInteger(opts.length) || opts.length < 0) throw new CollectiveError('bad_argument', `length must be a non-negative integer, got ${opts.length}`);
    let own: { indices: Uint32Array; values: Float32Array };
    try {
      own = sortedPairs(indices, values);
    } catch (e) {
      throw new CollectiveError('bad_argument', (e as Error).message);
    }
    const largest = own.indices.at(-1);
    if (largest !== undefined && largest >= opts.length) throw new CollectiveError('bad_argument', `index ${largest} is outside [0, ${opts.length})`);
    // Every member adds the values as they went on the wire, its own included.
    if (dtype === 'f16') roundToF16(own.values, 0, own.values.length);
    const op = opts.op ?? 'sum';
    return this.schedule(opts.deadlineMs, (seq, deadline) => new SparseGatherRun(this, seq, deadline, dtype, own.indices, own.values, opts.length, op));
  }
}

function checkDType(d: string): void {
  if (d !== 'f32' && d !== 'f16') throw new CollectiveError('bad_argument', `wire dtype must be f32 or f16, got ${d}`);
}
