// Robust Moshpit groups in the in-process runner (an untrusted job of more than one group): each sync
// the members are split at random into groups of at most `size` (sizes differing by at most one,
// drawn anew every sync from the run's seed, as the server draws them from its own randomness), and
// each group runs the real robust group average (collective Group, groupExchange) with the job's rule.
// Attackers (`tamper`) see only their own group's payloads, as a real attacker sees only its group.
import { Group, type MemoryTransport } from '@tabfleet/collective';
import { mulberry32 } from '@tabfleet/protocol';
import { groupExchange, type GroupCombine } from './exchange';
import type { Payload } from './strategies';

/** Replaces a group's payloads (members' ids in the same order) before they go out. */
export type GroupTamper = (payloads: readonly Payload[], seq: number, ids: readonly string[]) => Payload[] | Promise<Payload[]>;

/**
 * `ids` split at random into ⌈n / size⌉ groups whose sizes differ by at most one: a seeded shuffle
 * of sync `seq`, dealt round-robin. Every sync (and every seed) gives a fresh, independent split.
 */
export function randomGroups(ids: readonly string[], seq: number, size: number, seed = 1): string[][] {
  if (!(Number.isInteger(size) && size >= 1)) throw new Error(`group size ${size}: need a positive integer`);
  const order = [...ids];
  const rand = mulberry32(((seed * 0x9e3779b1) ^ Math.imul(seq, 0x85ebca6b)) >>> 0);
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  const count = Math.ceil(order.length / size);
  const groups: string[][] = Array.from({ length: count }, () => []);
  order.forEach((id, i) => groups[i % count].push(id));
  return groups;
}

/** Groups in which attackers hold a strict majority (more than half the members). */
export function attackerMajorities(groups: readonly (readonly string[])[], attackers: ReadonlySet<string>): number {
  return groups.filter((g) => 2 * g.filter((id) => attackers.has(id)).length > g.length).length;
}

export interface RobustGroupedExchange {
  /** Per worker (in order): its group's combined parameters (what `prepareParams` takes). */
  means: Float32Array[];
  groups: string[][];
  /** Members whose contribution some owner of their group refused. */
  refused: string[];
  bytesSent: number[];
}

export interface RobustGroupedInput {
  ids: readonly string[];
  transports: readonly MemoryTransport[];
  /** Each member's own payload (the LocalSGD delta base − params) and the base it is from. */
  payloads: readonly Payload[];
  bases: readonly Float32Array[];
  /**
   * A vector every member knows: the run's common start. Members contribute their parameters less
   * it, so the screen compares how far each has moved (the rules are translation-equivariant; the
   * norm screen is not, and on raw parameters it would pass anything of a parameter vector's size).
   */
  reference: Float32Array;
  groups: string[][];
  combine: GroupCombine;
  tamper?: GroupTamper;
  seq: number;
  jobId: string;
  deadlineMs: number;
}

/**
 * One robust grouped sync: every group at once, each member contributing (base − sent delta) −
 * reference, the group's owners screening and combining with the rule; each member adopts
 * reference + its group's result, byte for byte the same within a group.
 */
export async function robustGroupedExchange(input: RobustGroupedInput): Promise<RobustGroupedExchange> {
  const { ids, transports, payloads, bases, reference } = input;
  const index = new Map(ids.map((id, i) => [id, i]));
  const means: Float32Array[] = new Array(ids.length);
  const bytesSent = ids.map(() => 0);
  const refused = new Set<string>();
  await Promise.all(input.groups.map(async (members) => {
    const at = members.map((id) => index.get(id)!);
    const own = at.map((i) => payloads[i]);
    const sent = input.tamper ? await input.tamper(own, input.seq, members) : own;
    if (sent.length !== members.length) throw new Error(`tamper returned ${sent.length} payloads for a group of ${members.length}`);
    const contributions = sent.map((p, k): Payload & { kind: 'dense' } => {
      if (p.kind !== 'dense') throw new Error('robust grouped runs exchange dense parameters');
      const base = bases[at[k]];
      return { ...p, values: base.map((b, j) => b - p.values[j] - reference[j]) };
    });
    if (members.length === 1) {
      means[at[0]] = reference.map((r, j) => r + contributions[0].values[j]);
      return;
    }
    const groups = members.map((id, k) => new Group({
      transport: transports[at[k]], members, self: id, jobId: input.jobId, round: input.seq, deadlineMs: input.deadlineMs,
    }));
    try {
      const results = await Promise.all(groups.map((g, k) => groupExchange(g, contributions[k], input.combine)));
      results.forEach((r, k) => {
        means[at[k]] = reference.map((x, j) => x + r.mean[j]);
        for (const x of r.refused) refused.add(x.member);
        bytesSent[at[k]] += groups[k].counters.bytesOut;
      });
    } finally {
      for (const g of groups) g.close();
    }
  }));
  return { means, groups: input.groups, refused: [...refused].sort(), bytesSent };
}

/** The run's common start: every member's committed parameters, which must be one vector. */
export function commonStart(bases: readonly Float32Array[]): Float32Array {
  const first = bases[0];
  for (const [k, b] of bases.entries()) {
    if (b.length !== first.length || b.some((v, j) => v !== first[j])) throw new Error(`robust grouped runs start from one model: member ${k} differs from member 0`);
  }
  return Float32Array.from(first);
}
