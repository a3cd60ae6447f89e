// One sync of a Moshpit job (a spec with `groupSize`; protocol's moshpit.ts forms the groups): the
// members at the barrier split into the sync's groups, each a ring of its own under its own round id.
// Groups settle one by one: a group commits as soon as all its members have their results (they go
// back to training at once), and a group that loses a member fails alone (its members keep their work
// and bring it to a later sync). The sync ends when every group has settled.
import { moshpitGroups, moshpitHouseholdGroups } from '@tabfleet/protocol';

export type GroupState = 'running' | 'committed' | 'failed';

export class GroupedSync {
  readonly groups: string[][];
  readonly state: GroupState[];
  private readonly indexOf = new Map<string, number>();
  /** Paced jobs: the next work's budget, fixed at the sync's first commit so every group plans alike (undefined: not yet). */
  budgetMs: number | null | undefined;
  /** When the last group committed: the sync's exchange time is from its begin to then. */
  lastCommitAt: number | null = null;

  /**
   * `members` in a stable order (by shard); round ids `firstRoundId` … `firstRoundId + groups − 1`.
   * With `householdOf` (hierarchical jobs: a member's address), each household's members are one
   * grid point: always in one group, side by side in its ring. With `localityOf` (regional groups: a
   * member's region hint), the grid is laid out by it (moshpitGroups). With `drawn` (untrusted jobs:
   * random-groups.ts), those are the groups.
   */
  constructor(members: readonly string[], seq: number, size: number, seed: number, readonly firstRoundId: number,
    layout: { householdOf?: (member: string) => string | undefined; localityOf?: (member: string) => string | undefined; drawn?: string[][] } = {}) {
    const { householdOf, localityOf, drawn } = layout;
    this.groups = drawn ?? (householdOf ? moshpitHouseholdGroups(members, householdOf, seq - 1, size, seed, localityOf) : moshpitGroups(members, seq - 1, size, seed, localityOf));
    this.state = this.groups.map(() => 'running');
    this.groups.forEach((g, i) => g.forEach((id) => this.indexOf.set(id, i)));
  }

  /**
   * The sync's own round id (its record in the store) is its last group's, so a restarted server,
   * which numbers rounds on from the highest id stored, never hands out a group's id again.
   */
  get lastRoundId(): number {
    return this.firstRoundId + this.groups.length - 1;
  }

  roundIdOf(group: number): number {
    return this.firstRoundId + group;
  }

  groupOf(member: string): number | undefined {
    return this.indexOf.get(member);
  }

  /** The group `member` is in when `roundId` is that group's round, else undefined. */
  groupIn(member: string, roundId: number): number | undefined {
    const g = this.indexOf.get(member);
    return g !== undefined && this.roundIdOf(g) === roundId ? g : undefined;
  }

  running(): number[] {
    return this.state.flatMap((s, g) => (s === 'running' ? [g] : []));
  }

  settled(): boolean {
    return this.state.every((s) => s !== 'running');
  }

  /** Members of the groups that committed. */
  committed(): string[] {
    return this.groups.flatMap((g, i) => (this.state[i] === 'committed' ? g : []));
  }

  summary(): string {
    return `${this.state.filter((s) => s === 'committed').length} of ${this.groups.length} groups committed`;
  }
}
