// One group averaging op (see group.ts): scatter each part to its owner, screen and combine the
// contributions to this member's own part, send that aggregate to everyone, collect the others'.
//
// Dense parts go as f32 or f16 values. Sparse ones (DGC payloads) go as the part's nonzero (index,
// value) pairs, indices relative to the part (collective's sparse codec): the owner reads an index a
// member did not send as that member's zero, combines the dense part, and sends back its nonzeros.
// Quantized contributions (int8, E2M1) go as each part's block-quantized bytes, parts cut along the
// blocks; the owner decodes them strictly before its rule sees them and sends back a dense aggregate.
import { combinePart, decodeQuantized, encodeQuantized, modelDigestAsync, roundToF16, type Frame } from '@tabfleet/protocol';
import { CollectiveError } from '../errors';
import type { Group, GroupAverageOptions } from '../group';
import { GroupPartsRun, type Incoming, type PartWire } from './group-parts';

/**
 * What the server cross-checks after a round (modelDigest of the values as they went on the wire):
 * sender i's `sent[j]` must equal owner j's `received[i]`, and every member's `gathered[j]` must
 * equal owner j's `aggregate`. A mismatch names a pair, one of whom lied or broke.
 */
export interface GroupDigests {
  /** Of each part this member sent, by owner index (its own part included). */
  sent: string[];
  /** Of each contribution to this member's part, by sender index. */
  received: string[];
  /** Of the aggregate of this member's part. */
  aggregate: string;
  /** Of each part's aggregate as it arrived, by owner index. */
  gathered: string[];
}

export interface GroupAverage {
  /** The combined vector, identical bytes at every member. */
  mean: Float32Array;
  /** Contributions to this member's part that it refused (their senders are at fault). */
  refused: { member: string; reason: string }[];
  digests: GroupDigests;
  /** This member's vector as it went on the wire (rounded for an f16 wire, decoded for a quantized one): what it sends validators (`Group.validate`). */
  contribution: Float32Array;
}

/** modelDigestAsync, never an unhandled rejection when the op fails before it awaits the digest. */
function digestOf(values: Float32Array): Promise<string> {
  const digest = modelDigestAsync(values);
  digest.catch(() => {});
  return digest;
}

export class GroupAverageRun extends GroupPartsRun<GroupAverage> {
  protected readonly name = 'average';
  /** This member's vector as it goes on the wire (rounded to f16 for an f16 wire). */
  private contribution!: Float32Array;
  /** Contributions to this member's part, by sender. */
  private parts: Float32Array[] = [];
  private scatterIn: Incoming[] = [];
  private result!: Float32Array;
  private gatherIn: Incoming[] = [];
  private aggregated = false;
  private refused: GroupAverage['refused'] = [];
  /**
   * The digests, taken as the values go out and come in (the runtime's SHA-256 reads them then, off
   * this thread where it can: SHA-256 in script held the event loop, 2.6 MB a sync for the MLP).
   */
  private digests: { [K in keyof GroupDigests]: GroupDigests[K] extends string ? Promise<string> | null : Promise<string>[] } = {
    sent: [], received: [], aggregate: null, gathered: [],
  };
  /** Everything arrived and went out: the op ends once the digests are in. */
  private finishing = false;

  constructor(group: Group, seq: number, deadlineMs: number, private readonly data: Float32Array, private readonly opts: GroupAverageOptions & PartWire) {
    super(group, seq, deadlineMs, data.length, opts);
  }

  protected start(): void {
    const { rank } = this.group;
    this.contribution = Float32Array.from(this.data);
    if (this.quantized) {
      for (let j = 0; j < this.n; j++) {
        const part = this.part(this.contribution, j);
        const bytes = encodeQuantized(part, this.quantized);
        decodeQuantized(bytes, part.length, this.quantized, undefined, part);
        this.encodedParts.set(j, bytes);
      }
    } else if (this.dtype === 'f16') {
      roundToF16(this.contribution, 0, this.len);
    }
    this.result = new Float32Array(this.len);
    for (let j = 0; j < this.n; j++) {
      this.digests.sent.push(digestOf(this.part(this.contribution, j)));
      this.parts.push(j === rank ? this.part(this.contribution, j).slice() : new Float32Array(this.partLength(rank)));
      this.scatterIn.push(this.incoming(rank, 'groupScatter', j === rank));
      this.gatherIn.push(this.incoming(j, 'groupGather', j === rank));
    }
    this.group.members.forEach((peer, j) => {
      if (j !== rank) this.sendPart([peer], 'groupScatter', j, this.contribution);
    });
  }

  protected onFrame(from: string, sender: number, f: Frame): void {
    const { rank } = this.group;
    // A scatter frame carries a piece of this member's part; a gather frame a piece of the sender's.
    const scatter = f.kind === 'groupScatter';
    if (!scatter && f.kind !== 'groupGather') return void this.bad(from, `a ${f.kind} frame in a group average`);
    const part = scatter ? rank : sender;
    if (f.segment !== part) return void this.bad(from, `${f.kind} frame for part ${f.segment}, expected ${part}`);
    const target = scatter ? this.parts[sender] : this.part(this.result, part);
    this.acceptChunk(from, f, part, scatter ? this.scatterIn[sender] : this.gatherIn[sender], target);
  }

  protected progress(): void {
    this.maybeAggregate();
    this.maybeFinish();
  }

  /** Once every contribution to this member's part is in: screen, combine, send the aggregate to all. */
  private maybeAggregate(): void {
    if (this.aggregated || this.done || !this.scatterIn.every(GroupPartsRun.complete)) return;
    this.aggregated = true;
    const { rank, members } = this.group;
    this.digests.received = this.parts.map(digestOf);
    const { aggregate, refused } = combinePart(this.parts, this.partLength(rank), this.opts.rule, { trimFraction: this.opts.trimFraction, weights: this.opts.weights, f16: this.dtype === 'f16' });
    this.refused = refused.map((r) => ({ member: members[r.index], reason: r.reason }));
    if (!aggregate) {
      this.fail(new CollectiveError('bad_frame', `every contribution to part ${rank} was refused: ${this.refused.map((r) => `${r.member}: ${r.reason}`).join('; ')}`));
      return;
    }
    this.result.set(aggregate, this.partStart(rank));
    this.digests.aggregate = digestOf(aggregate);
    this.parts = []; // the contributions are no longer needed
    this.sendPart(this.group.peers, 'groupGather', rank, this.result, 1);
  }

  private maybeFinish(): void {
    if (this.done || this.finishing || !this.aggregated || !this.gatherIn.every(GroupPartsRun.complete) || !this.sendsDrained()) return;
    this.finishing = true;
    for (let j = 0; j < this.n; j++) this.digests.gathered.push(digestOf(this.part(this.result, j)));
    const { sent, received, aggregate, gathered } = this.digests;
    Promise.all([Promise.all(sent), Promise.all(received), aggregate!, Promise.all(gathered)]).then(
      ([s, r, a, g]) => this.finish({ mean: this.result, refused: this.refused, digests: { sent: s, received: r, aggregate: a, gathered: g }, contribution: this.contribution }),
      (e: unknown) => this.fail(new CollectiveError('bad_argument', `could not digest the values: ${String(e)}`)),
    );
  }
}
