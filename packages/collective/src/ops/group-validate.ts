// One group validation op (see Group.validate): after an average, the server names parts and, for
// each, a validator that is not the part's owner. Every other member sends the validator its
// contribution to that part, exactly as it sent it to the owner; the validator combines them with the
// owner's code (protocol's combinePart) and reports digests of what it received and of its aggregate.
// The server holds every member's digests of the average, so it can tell whose word is false.
import { combinePart, modelDigestAsync, type Frame, type PartCheck } from '@tabfleet/protocol';
import { CollectiveError } from '../errors';
import type { Group, GroupAverageOptions } from '../group';
import { GroupPartsRun, type Incoming, type PartWire } from './group-parts';

/** What a validator found for one part (digests as in GroupDigests). */
export interface PartValidation {
  part: number;
  /** Of each member's contribution to the part as the validator received it, by member index. */
  received: string[];
  /** Of the validator's own aggregate of the part; '' when it refused every contribution. */
  aggregate: string;
  refused: { member: string; reason: string }[];
}

interface Check {
  part: number;
  contributions: Float32Array[];
  incoming: Incoming[];
}

export class GroupValidateRun extends GroupPartsRun<PartValidation[]> {
  protected readonly name = 'validation';
  /** The parts this member validates, by part index. */
  private readonly mine = new Map<number, Check>();
  /** Every contribution arrived: the op ends once their digests are in. */
  private finishing = false;

  constructor(group: Group, seq: number, deadlineMs: number, private readonly contribution: Float32Array, private readonly checks: readonly PartCheck[],
    private readonly opts: GroupAverageOptions & PartWire) {
    super(group, seq, deadlineMs, contribution.length, opts);
  }

  protected start(): void {
    const { rank, self } = this.group;
    for (const c of this.checks) {
      if (c.validator !== self) {
        this.sendPart([c.validator], 'groupValidate', c.part, this.contribution);
        continue;
      }
      const contributions = this.group.members.map((_, i) => (i === rank ? this.part(this.contribution, c.part).slice() : new Float32Array(this.partLength(c.part))));
      this.mine.set(c.part, { part: c.part, contributions, incoming: this.group.members.map((_, i) => this.incoming(c.part, 'groupValidate', i === rank)) });
    }
  }

  protected onFrame(from: string, sender: number, f: Frame): void {
    if (f.kind !== 'groupValidate') return void this.bad(from, `a ${f.kind} frame in a group validation`);
    const check = this.mine.get(f.segment);
    if (!check) return void this.bad(from, `a contribution to part ${f.segment}, which this member does not validate`);
    this.acceptChunk(from, f, check.part, check.incoming[sender], check.contributions[sender]);
  }

  protected progress(): void {
    if (this.done || this.finishing || !this.sendsDrained()) return;
    for (const c of this.mine.values()) if (!c.incoming.every(GroupPartsRun.complete)) return;
    this.finishing = true;
    Promise.all([...this.mine.values()].map((c) => this.recompute(c))).then(
      (found) => this.finish(found),
      (e: unknown) => this.fail(new CollectiveError('bad_argument', `could not digest the values: ${String(e)}`)),
    );
  }

  private async recompute(c: Check): Promise<PartValidation> {
    const { aggregate, refused } = combinePart(c.contributions, this.partLength(c.part), this.opts.rule, { trimFraction: this.opts.trimFraction, weights: this.opts.weights,
      f16: this.dtype === 'f16' });
    const [received, aggregateDigest] = await Promise.all([Promise.all(c.contributions.map((x) => modelDigestAsync(x))), aggregate ? modelDigestAsync(aggregate) : '']);
    return { part: c.part, received, aggregate: aggregateDigest, refused: refused.map((r) => ({ member: this.group.members[r.index], reason: r.reason })) };
  }
}
