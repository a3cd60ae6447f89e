// One untrusted group round of the simulator's members (simulator.ts), computed with the runtime's own
// rules: each owner screens and combines the contributions to its part with protocol's combinePart
// (the norm screen, then the job's robust rule, paced weights capped as every party caps them), and
// every digest is modelDigest of a part as it went on the wire, as collective's group average
// (ops/group-average.ts) reports them. What the members then send the server (round:result's group
// report, round:validation, evidence:upload) is judged by the real coordinator (checked-groups.ts).
// Only the wire is skipped: every member is computed in one place, since honest members agree on it.
import { cappedWeights, combinePart, modelDigest, partRange, type GroupReport, type JobSpec, type PartValidationReport } from '@tabfleet/protocol';

/**
 * What an attacker does. `scale`: sends its parameters ×SCALE (a tab scaling its update); `sign-flip`:
 * sends them negated; `wrong-aggregate`: as an owner, sends everyone its part's aggregate negated and
 * reports that digest, so every digest agrees (only a validator's recomputation shows it).
 * Otherwise an attacker is honest: it screens and combines as the runtime does, and validates truly.
 */
export const ATTACKS = ['scale', 'sign-flip', 'wrong-aggregate'] as const;
export type Attack = (typeof ATTACKS)[number];

export const SCALE = 1e6;

export interface GroupMember {
  id: string;
  params: Float32Array;
  attack: Attack | null;
}

export interface GroupOutcome {
  members: string[];
  /** What each member sent every owner (and validators, and the server as evidence), in member order. */
  contributions: Float32Array[];
  /** Each member's group report for round:result. */
  reports: Map<string, GroupReport>;
  /** The vector every member holds after the round: each part as its owner sent it. Null: an owner refused every contribution. */
  mean: Float32Array | null;
  /** Weights the rules used (paced rounds), in member order. */
  weights: number[] | undefined;
}

function contributionOf(m: GroupMember): Float32Array {
  if (m.attack === 'scale') return m.params.map((v) => v * SCALE);
  if (m.attack === 'sign-flip') return m.params.map((v) => -v);
  return m.params.slice();
}

const partOf = (x: Float32Array, n: number, j: number) => {
  const { start, end } = partRange(x.length, n, j);
  return x.subarray(start, end);
};

function combine(contributions: readonly Float32Array[], j: number, spec: JobSpec, weights: number[] | undefined) {
  const xs = contributions.map((c) => partOf(c, contributions.length, j));
  return combinePart(xs, xs[0].length, spec.aggregation, { trimFraction: spec.trimFraction, weights, f16: spec.compression !== 'none' });
}

/** The group's round: every member's contribution, each owner's aggregate, and every member's report. `steps`: round:begin's (paced). */
export function groupRound(members: readonly GroupMember[], spec: JobSpec, steps?: Record<string, number>): GroupOutcome {
  const n = members.length;
  const contributions = members.map(contributionOf);
  const weights = steps ? cappedWeights(members.map((m) => steps[m.id])) : undefined;
  const sent = contributions.map((c) => Array.from({ length: n }, (_, j) => modelDigest(partOf(c, n, j))));
  let mean: Float32Array | null = new Float32Array(members[0].params.length);
  const aggregates: string[] = [];
  const refused: GroupReport['refused'][] = [];
  for (let j = 0; j < n; j++) {
    const { aggregate, refused: r } = combine(contributions, j, spec, weights);
    refused.push(r.map((x) => ({ member: members[x.index].id, reason: x.reason })));
    if (!aggregate) {
      mean = null;
      aggregates.push('');
      continue;
    }
    const told = members[j].attack === 'wrong-aggregate' ? aggregate.map((v) => -v) : aggregate;
    mean?.set(told, partRange(mean.length, n, j).start);
    aggregates.push(modelDigest(told));
  }
  const reports = new Map(members.map((m, i) => [m.id, {
    refused: refused[i],
    digests: { sent: sent[i], received: sent.map((s) => s[i]), aggregate: aggregates[i], gathered: aggregates },
  }]));
  return { members: members.map((m) => m.id), contributions, reports, mean, weights };
}

/** A validator's report of `part` (Group.validate): digests of what every member sent it, and its own recomputation. */
export function validatePart(g: GroupOutcome, part: number, spec: JobSpec): PartValidationReport {
  const n = g.members.length;
  const { aggregate, refused } = combine(g.contributions, part, spec, g.weights);
  return {
    part, received: g.contributions.map((c) => modelDigest(partOf(c, n, part))), aggregate: aggregate ? modelDigest(aggregate) : '',
    refused: refused.map((x) => ({ member: g.members[x.index], reason: x.reason })),
  };
}

/** A member's evidence of `part`: its contribution as it sent it, little-endian f32. */
export function evidenceOf(g: GroupOutcome, member: string, part: number): Uint8Array {
  const values = partOf(g.contributions[g.members.indexOf(member)], g.members.length, part).slice();
  return new Uint8Array(values.buffer);
}
