// One sync of a Moshpit job (a spec with `groupSize`; protocol's moshpit.ts forms the groups): the
// members at the barrier split into the sync's groups, each a ring of its own under its own round id.
// Groups settle one by one: a group commits as soon as all its members have their results (they go
// back to training at once), and a group that loses a member fails alone (its members keep their work
// and bring it to a later sync). The sync ends when every group has settled. A checked group
// (untrusted jobs) whose checks removed a liar may run once more without it, under a round id the
// sync reserved for that (rerun): its honest members then commit this sync instead of sitting it out.
import { moshpitGroups, moshpitHouseholdGroups, type RoundBegin } from '@tabfleet/protocol';

/** What every group's round:begin shares (the sync's job, seq, mode, times, uploader and evaluators). */
export type SyncBegin = Pick<RoundBegin, 'jobId' | 'seq' | 'mode' | 'began' | 'deadline' | 'uploader' | 'evaluators'>;
type Send = (to: string[], event: 'round:begin', payload: RoundBegin) => void;

export type GroupState = 'running' | 'committed' | 'failed';

export class GroupedSync {
  readonly groups: string[][];
  readonly state: GroupState[];
  private readonly indexOf = new Map<string, number>();
  /** Each group's current round id: its first, or after a rerun the one reserved for it. */
  private readonly roundIds: number[];
  /** Checked groups (drawn): each may run once more, under a round id reserved past the first ones. */
  private readonly reruns: boolean;
  /** The round:begin the groups share, and each member's steps (paced), from announce. */
  private begun: { common: SyncBegin; steps: Record<string, number> | null } | null = null;
  /** Paced jobs: the next work's budget, fixed at the sync's first commit so every group plans alike (undefined: not yet). */
  budgetMs: number | null | undefined;
  /** When the last group committed: the sync's exchange time is from its begin to then. */
  lastCommitAt: number | null = null;

  /**
   * `members` in a stable order (by shard); round ids `firstRoundId` … `firstRoundId + groups − 1`
   * (drawn groups reserve as many again for reruns).
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
    this.roundIds = this.groups.map((_, i) => firstRoundId + i);
    this.reruns = !!drawn;
  }

  /** Sends every group its round:begin (paced: each group's members' steps, the weights of its own mean). */
  announce(common: SyncBegin, steps: Record<string, number> | null, send: Send): void {
    this.begun = { common, steps };
    this.groups.forEach((_, g) => this.beginGroup(g, send));
  }

  private beginGroup(g: number, send: Send): void {
    const { common, steps } = this.begun!;
    const members = this.groups[g];
    const groupSteps = steps ? { steps: Object.fromEntries(members.map((id) => [id, steps[id]])) } : {};
    send(members, 'round:begin', { ...common, roundId: this.roundIds[g], members, quorum: members.length, grouped: true, ...groupSteps });
  }

  /**
   * Whether group `g` may run again with `members` at `now`: a checked group, not yet rerun, of two
   * members or more, with as much time before the sync's deadline as the sync has taken so far.
   */
  canRerun(g: number, members: readonly string[], now: number): boolean {
    if (!this.reruns || !this.begun || this.roundIds[g] !== this.firstRoundId + g || members.length < 2) return false;
    return this.begun.common.deadline - now >= now - this.begun.common.began;
  }

  /** Group `g` runs once more with `members` (its liars gone) under its reserved round id. */
  rerun(g: number, members: string[], send: Send): number {
    for (const id of this.groups[g]) if (!members.includes(id)) this.indexOf.delete(id);
    this.groups[g] = members;
    this.state[g] = 'running';
    this.roundIds[g] = this.firstRoundId + this.groups.length + g;
    this.beginGroup(g, send);
    return this.roundIds[g];
  }

  /**
   * The sync's own round id (its record in the store) is its last group's, so a restarted server,
   * which numbers rounds on from the highest id stored, never hands out a group's id again.
   */
  get lastRoundId(): number {
    return this.firstRoundId + this.groups.length * (this.reruns ? 2 : 1) - 1;
  }

  roundIdOf(group: number): number {
    return this.roundIds[group];
  }

  /** The group whose round (first or rerun) is `roundId`, else undefined. */
  groupOfRound(roundId: number): number | undefined {
    const g = this.roundIds.indexOf(roundId);
    return g < 0 ? undefined : g;
  }

  groupOf(member: string): number | undefined {
    return this.indexOf.get(member);
  }

  /** The group `member` is in when `roundId` is that group's round, else undefined. */
  groupIn(member: string, roundId: number): number | undefined {
    const g = this.indexOf.get(member);
    return g !== undefined && this.roundIds[g] === roundId ? g : undefined;
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
