// Which parts of a group round the server validates. Protocol's checksFor draws about
// VALIDATED_PART_SHARE of them with the parts of members on probation first, so a member with standing
// in a group holding as many probationers as there are checks could tell, before it sent anything,
// that its part would not be drawn (who is on probation is public: the worker table) and lie unseen
// (server/test/adaptive-owner.test.ts). Here every part is drawn uniformly at that share, whoever else
// is in the group, and every part of a member on probation is checked: probation adds checks, it never
// takes them from anyone. Checking only some of them (up to as many again as the uniform draw) let
// lying owners on probation, rejoining under fresh identities, spoil an untrusted job of thousands: in
// the simulator at N = 256 with 10% attackers the honest members reached consensus in 18-25 syncs,
// against 8-9 with every probationer's part checked (h-sim10k's finding).
import { checksFor, pickValidator, type PartCheck } from '@tabfleet/protocol';

/**
 * The checks of a group round of `members`: protocol's uniform draw (each part with probability
 * VALIDATED_PART_SHARE, at least one part), then every undrawn part of a member in `probation`. Validators
 * as checksFor picks them: never the part's owner, of another network where there is one, a different
 * member per check while there are enough.
 */
export function drawChecks(members: readonly string[], rand: () => number, probation: ReadonlySet<string>, sameNetwork?: (a: string, b: string) => boolean): PartCheck[] {
  if (members.length < 2) return []; // nobody to check a lone member's part
  const uniform = checksFor(members, rand, new Set(), sameNetwork);
  const drawn = new Set(uniform.map((c) => c.part));
  const missed = [...members.keys()].filter((j) => probation.has(members[j]) && !drawn.has(j));
  const busy = new Set(uniform.map((c) => c.validator));
  const extra = missed.map((part) => ({ part, validator: pickValidator(members, part, busy, rand, sameNetwork) }));
  return [...uniform, ...extra];
}
