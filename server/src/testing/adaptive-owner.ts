// An adaptive attacker as code (issue 37, (a)): an owner that behaves whenever it could be validated
// and lies otherwise. What it can know when it must commit to its part's aggregate: the round's
// members (round:begin), and who is on probation — not from the worker table (the researcher's), but
// from every round:validate its coalition received, which names each check's owner and validator (a
// check that passed confirmed both; PROBATION_VERIFIED of them end probation). It cannot see the
// round's draw: the server draws validators after every result is in. So it guesses: with probation
// first (protocol's checksFor) the checks go to probationers' parts while there are enough of them,
// and at most ⌈VALIDATED_PART_SHARE · n⌉ parts are checked; it lies when its group holds that many
// members it believes on probation and it has standing itself.
import { PROBATION_VERIFIED, VALIDATED_PART_SHARE, type PartCheck, type RoundBegin } from '@tabfleet/protocol';
import type { OwnerLie } from './exchange';
import type { SimVolunteer } from './sim-volunteer';

/** What a coalition of simulated volunteers has seen of a job's checks, pooled. */
export class CoalitionView {
  private readonly sims: SimVolunteer[] = [];

  /** `standing`: identities the coalition knows have standing (its own established members). */
  constructor(private readonly standing: () => ReadonlySet<string>) {}

  join(sim: SimVolunteer): void {
    this.sims.push(sim);
  }

  /** Distinct checks (round, part) that named `volunteerId` as owner or validator, as the coalition saw them. */
  confirmations(volunteerId: string): number {
    const seen = new Set<string>();
    for (const s of this.sims) {
      const begins = new Map<number, readonly string[]>();
      for (const e of s.events) {
        if (e.name === 'round:begin') begins.set((e.payload as RoundBegin).roundId, (e.payload as RoundBegin).members);
        if (e.name !== 'round:validate') continue;
        const v = e.payload as { roundId: number; checks: PartCheck[] };
        const members = begins.get(v.roundId) ?? [];
        for (const c of v.checks) if (c.validator === volunteerId || members[c.part] === volunteerId) seen.add(`${v.roundId}/${c.part}`);
      }
    }
    return seen.size;
  }

  onProbation(volunteerId: string): boolean {
    return !this.standing().has(volunteerId) && this.confirmations(volunteerId) < PROBATION_VERIFIED;
  }
}

/** The most parts a round of `n` members checks (checksFor: VALIDATED_PART_SHARE · n, rounded up at random, at least one). */
export function mostChecks(n: number): number {
  return Math.min(n, Math.max(1, Math.ceil(VALIDATED_PART_SHARE * n)));
}

/** One adaptive owner: its lie, when it tells it, and the rounds it told it in. */
export class AdaptiveOwner {
  /** Rounds it lied in (its part's aggregate changed, reported and sent consistently). */
  readonly lies: number[] = [];
  /** Rounds it behaved in because it could have been checked. */
  readonly behaved: number[] = [];

  constructor(
    private readonly self: () => string,
    private readonly view: CoalitionView,
    private readonly lie: (aggregate: Float32Array) => Float32Array = (a) => a.map((v) => v + 1),
  ) {}

  /** The SimOptions.ownerLie of this owner. */
  readonly ownerLie: OwnerLie = (aggregate, round) => {
    const me = this.self();
    const probationers = round.members.filter((id) => id !== me && this.view.onProbation(id)).length;
    if (this.view.onProbation(me) || probationers < mostChecks(round.members.length)) {
      this.behaved.push(round.roundId);
      return aggregate;
    }
    this.lies.push(round.roundId);
    return this.lie(aggregate);
  };
}
