// Untrusted Moshpit syncs (trust untrusted with `groupSize`): the server draws the sync's groups at
// random (random-groups.ts), and each group is a checked group round of its own (group-round.ts:
// screening and the job's rule per part, digests, validators drawn within the group, disputes settled
// by recomputation). The checks see a group's own view of the sync (its round id, members, results,
// validation and disputes); a group that passes commits alone (sync-commits.ts commitGroup). One whose
// checks fail has its liars removed and runs once more without them while the sync's deadline leaves
// time (grouped-sync.ts rerun), else sits the sync out alone (failGroup); the other groups go on.
// Ungrouped rounds pass straight through to the coordinator.
import type { VolunteerEventParsed } from '@tabfleet/protocol';
import type { Fault } from './checkpoints';
import { GroupRoundChecks, type GroupRoundHost } from './group-round';
import { randomGroups, type RandomGroups } from './random-groups';
import type { ActiveRound } from './round';
import type { SyncCommits } from './sync-commits';
import type { CoordinatorDeps } from './types';

/** The checks' host (group-round.ts) less commit and reject, which this routes. */
export interface CheckedGroupsHost extends Omit<GroupRoundHost, 'commit' | 'reject' | 'deps'> {
  readonly deps: Pick<CoordinatorDeps, 'toVolunteer' | 'log' | 'count' | 'clock'>;
  readonly commits: Pick<SyncCommits, 'commit' | 'commitGroup' | 'failGroup'>;
  /** Whether the volunteer is still a member of the job. */
  isMember(volunteerId: string): boolean;
  /** An ungrouped round is rejected (group-round.ts's reject). */
  rejectRound(r: ActiveRound, liars: string[], why: string, fault?: string): void;
  evict(volunteerId: string, why: string, fault: Fault): void;
}

export class CheckedGroups {
  /** Each running sync's checked groups, by group index, and each view's sync and group. */
  private readonly views = new WeakMap<ActiveRound, Map<number, ActiveRound>>();
  private readonly origin = new WeakMap<ActiveRound, { sync: ActiveRound; group: number }>();
  /** Members the checks just sent to sit out (an accusation nobody could settle): no rerun takes them. */
  private readonly sitters = new Set<string>();

  /** Every group round's checks (an ungrouped untrusted round's too). */
  readonly checks: GroupRoundChecks;

  constructor(private readonly host: CheckedGroupsHost) {
    this.checks = new GroupRoundChecks({
      ...bound(host), commit: (r) => this.commit(r), reject: (r, liars, why, fault) => this.reject(r, liars, why, fault),
      sitOut: (ids, why) => {
        for (const id of ids) this.sitters.add(id);
        host.sitOut(ids, why);
      },
    });
  }

  /**
   * This sync's groups of at most `size`, from the server's own randomness. A member's voice is its
   * network where networks count (voiceOf), so no network holds over half of a group.
   */
  draw(members: readonly string[], size: number): RandomGroups {
    const drawn = randomGroups(members, size, (id) => this.host.voiceOf(id));
    if (drawn.leftOut.length) this.host.deps.log(`job ${this.host.jobId}: ${drawn.leftOut.join(', ')} wait(s) for a later sync: their network would hold over half of a group`);
    return drawn;
  }

  /** Every member of group `g` has its result in: the group's own checks begin. */
  resultsIn(sync: ActiveRound, g: number): void {
    const gs = sync.groups!;
    const members = gs.groups[g];
    const view: ActiveRound = {
      ...sync, roundId: gs.roundIdOf(g), members, results: new Map(members.map((id) => [id, sync.results.get(id)!])), failures: sync.failures,
      removeAtCommit: [], validation: null, disputes: null, groups: null, cancelDeadline: () => {},
    };
    if (!this.views.has(sync)) this.views.set(sync, new Map());
    this.views.get(sync)!.set(g, view);
    this.origin.set(view, { sync, group: g });
    this.checks.resultsIn(view);
  }

  /** The round `id`'s checks are of: its group's view in a checked grouped sync, else the round itself. */
  viewOf(r: ActiveRound, id: string): ActiveRound {
    const g = r.groups?.groupOf(id);
    return (g !== undefined && this.views.get(r)?.get(g)) || r;
  }

  onValidation(m: { volunteerId: string }, r: ActiveRound, e: VolunteerEventParsed<'round:validation'>): object {
    return this.checks.onValidation(m, this.viewOf(r, m.volunteerId), e);
  }

  onEvidence(m: { volunteerId: string }, r: ActiveRound, e: VolunteerEventParsed<'evidence:upload'>): object {
    return this.checks.onEvidence(m, this.viewOf(r, m.volunteerId), e);
  }

  /** The checks passed: a group commits alone and the members its owners refused are removed after. */
  commit(r: ActiveRound): void {
    const from = this.origin.get(r);
    if (!from) return this.host.commits.commit(r);
    this.host.commits.commitGroup(from.sync, from.group);
    for (const x of r.removeAtCommit) this.host.evict(x.member, x.reason, 'integrity');
  }

  /**
   * The checks failed: a group's liars are removed. When the checks named a liar, the rest run the
   * group once more without it (grouped-sync.ts canRerun); otherwise, or when that fails too, the group
   * sits this sync out (its honest members keep their work for the next). The other groups are not held up.
   */
  reject(r: ActiveRound, liars: string[], why: string, fault = why): void {
    const from = this.origin.get(r);
    const sitters = [...this.sitters];
    this.sitters.clear();
    if (!from) return this.host.rejectRound(r, liars, why, fault);
    const { sync, group } = from;
    const gs = sync.groups!;
    // Failed before the liars go, so their removal is not taken for a member lost mid-round.
    gs.state[group] = 'failed';
    for (const id of liars) this.host.evict(id, `round ${r.roundId}: ${fault}`, 'integrity');
    const rest = r.members.filter((id) => !liars.includes(id) && !sitters.includes(id) && this.host.isMember(id));
    if (liars.length && gs.canRerun(group, rest, this.host.deps.clock.now())) return this.rerun(sync, group, rest, `checks failed: ${why}`, liars);
    // The last group to settle ends the sync, and the next may begin (sync-commits.ts).
    this.host.commits.failGroup(sync, group, `checks failed: ${why}`, liars);
  }

  /**
   * The group's round is aborted for its members (those sent to sit out too), and `rest` begin it
   * again among themselves (they kept what they sent).
   */
  private rerun(sync: ActiveRound, group: number, rest: string[], reason: string, lost: string[]): void {
    const gs = sync.groups!;
    const [old, dropped] = [gs.roundIdOf(group), gs.groups[group].filter((id) => !rest.includes(id))];
    const told = gs.groups[group].filter((id) => !lost.includes(id) && this.host.isMember(id));
    this.host.deps.toVolunteer(told, 'round:abort', { jobId: this.host.jobId, roundId: old, reason, lost });
    for (const id of gs.groups[group]) {
      sync.results.delete(id);
      sync.failures.delete(id);
    }
    this.views.get(sync)?.delete(group);
    const roundId = gs.rerun(group, rest, (to, event, payload) => this.host.deps.toVolunteer(to, event, payload));
    this.host.deps.count('groups_rerun');
    this.host.deps.log(`job ${this.host.jobId}: group round ${old} of sync ${sync.seq} runs again as ${roundId} without ${dropped.join(', ')}: ${reason}`);
  }
}

/** The host's members as a plain object whose getters still read the host (jobId and spec change with the job). */
function bound(host: CheckedGroupsHost): Omit<GroupRoundHost, 'commit' | 'reject'> {
  return {
    get jobId() { return host.jobId; },
    get spec() { return host.spec; },
    deps: host.deps,
    onProbation: (id) => host.onProbation(id), verified: (id) => host.verified(id), sameNetwork: (a, b) => host.sameNetwork(a, b),
    voiceOf: (id) => host.voiceOf(id), hasStanding: (id) => host.hasStanding(id), sitOut: (ids, why) => host.sitOut(ids, why),
  };
}
