// Which parts of a group round the server validates. Protocol's checksFor draws about
// VALIDATED_PART_SHARE of them with the parts of members on probation first, so a member with standing
// in a group holding as many probationers as there are checks could tell, before it sent anything,
// that its part would not be drawn (who is on probation is public: the worker table) and lie unseen
// (server/test/adaptive-owner.test.ts). Here every part is drawn uniformly at that share, whoever else
// is in the group, and the parts of members on probation that the draw missed are checked on top (up
// to as many again): probation adds checks, it never takes them from anyone.
import { checksFor, type PartCheck } from '@tabfleet/protocol';

/**
 * The checks of a group round of `members`: protocol's uniform draw (each part with probability
 * VALIDATED_PART_SHARE, at least one part), then the undrawn parts of members in `probation`, in random
 * order, up to as many as the uniform draw took. Validators as checksFor picks them: never the part's
 * owner, of another network where there is one, a different member per check while there are enough.
 */
export function drawChecks(members: readonly string[], rand: () => number, probation: ReadonlySet<string>, sameNetwork?: (a: string, b: string) => boolean): PartCheck[] {
  const uniform = checksFor(members, rand, new Set(), sameNetwork);
  const drawn = new Set(uniform.map((c) => c.part));
  const missed = [...members.keys()].filter((j) => probation.has(members[j]) && !drawn.has(j));
  for (let i = missed.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [missed[i], missed[j]] = [missed[j], missed[i]];
  }
  const busy = new Set(uniform.map((c) => c.validator));
  const extra = missed.slice(0, uniform.length).map((part) => ({ part, validator: validatorFor(members, part, busy, rand, sameNetwork) }));
  return [...uniform, ...extra];
}

/** A member other than the part's owner, of another network where there is one, not yet busy where possible. */
function validatorFor(members: readonly string[], part: number, busy: Set<string>, rand: () => number, sameNetwork?: (a: string, b: string) => boolean): string {
  const others = members.filter((_, i) => i !== part);
  const apart = sameNetwork ? others.filter((id) => !sameNetwork(id, members[part])) : others;
  const candidates = apart.length ? apart : others;
  const free = candidates.filter((id) => !busy.has(id));
  const pool = free.length ? free : candidates;
  const validator = pool[Math.floor(rand() * pool.length)];
  busy.add(validator);
  return validator;
}
