// Who may join a job and who takes part in its next sync: a volunteer kept out after a fault (penalties.ts)
// or from an address holding its share of the slots is refused; in untrusted jobs on a server that
// tells networks apart (standing.ts), one network is never a majority of the members nor of a round;
// and members an unsettled accusation names sit out the next sync.
import { flatLengthOf } from '@tabfleet/protocol';
import type { JobHost, Member } from './members';
import type { Penalties } from './penalties';
import { hasStanding, networkOf, networkWouldDominate } from './standing';
import type { VolunteerInfo } from './types';

export interface AdmissionHost extends JobHost {
  readonly penalties: Penalties;
  readonly networkRulesApply: boolean;
  hasStanding(identity: string): boolean;
}

export class Admission {
  constructor(private readonly host: AdmissionHost) {}

  networkOf(address: string | undefined): string {
    return networkOf(address, this.host.deps.networkRules ?? false);
  }

  /** Whether the volunteer's adapter can bind the job's parameters in one storage buffer. */
  fits(v: VolunteerInfo): boolean {
    return v.capabilities.limits.maxStorageBufferBindingSize >= flatLengthOf(this.host.job.spec) * 4;
  }

  /** Why this volunteer may not join now: kept out after a fault, or its address or network holds its share of slots. */
  refusal(v: VolunteerInfo): string | null {
    const { job, deps, members } = this.host;
    const identity = v.clientId ?? v.volunteerId;
    const network = this.networkOf(v.address);
    const newcomer = !hasStanding(v.reputation) && !this.host.hasStanding(identity);
    const kept = this.host.penalties.keptOut(identity, network, deps.clock.now(), newcomer);
    if (kept) return kept;
    const share = deps.addressJobShare ?? 1;
    const from = members.countFrom(v.address, network);
    if (v.address && share < 1) {
      const cap = Math.max(1, Math.floor(job.spec.maxWorkers * share));
      if (from.address >= cap) return `${from.address} of this job's slots are taken from your address (at most ${cap})`;
    }
    if (this.host.networkRulesApply && networkWouldDominate(from.network, members.size)) {
      return `${from.network} of this job's ${members.size} members are from your network (${network}); one network is never a majority of an untrusted job`;
    }
    return null;
  }

  /**
   * The members of the coming sync from those `ready`: members that sit out (sitOut) are left out and
   * reload the job's model after it, unless that leaves fewer than the job's minimum: then nobody sits out.
   */
  ringOf(ready: Member[]): Member[] {
    const { job, deps } = this.host;
    const ring = this.withoutNetworkMajority(ready.filter((m) => !m.sitsOut));
    if (ring.length === ready.length) return ready;
    if (ring.length >= Math.max(1, job.spec.minWorkers)) return ring;
    deps.log(`job ${job.id}: ${ready.length - ring.length} member(s) were to sit out sync ${job.seq + 1}, which leaves fewer than ${job.spec.minWorkers}: all take part`);
    for (const m of ready) m.sitsOut = false;
    return ready;
  }

  /**
   * Untrusted jobs: one network is never a majority of a round. A join cannot make it one, but the
   * others leaving can: then its surplus members (those with standing and the earliest seats kept)
   * sit out the sync. A network alone in the job has nobody to outvote, and keeps its members.
   */
  private withoutNetworkMajority(ring: Member[]): Member[] {
    if (!this.host.networkRulesApply) return ring;
    const byNetwork = new Map<string, Member[]>();
    for (const m of ring) byNetwork.set(m.network, [...(byNetwork.get(m.network) ?? []), m]);
    const standing = (m: Member) => Number(this.host.hasStanding(m.identity));
    for (const [network, ms] of byNetwork) {
      const others = ring.length - ms.length;
      if (ms.length * 2 <= ring.length || others === 0) continue;
      const surplus = [...ms].sort((a, b) => standing(b) - standing(a) || a.shard - b.shard).slice(others);
      this.sitOut(surplus.map((m) => m.volunteerId), `${ms.length} of the ${ring.length} ready members are of network ${network}: one network is never a majority of a round`);
      return ring.filter((m) => !surplus.includes(m));
    }
    return ring;
  }

  /** An accusation nobody could settle: both sides sit out the next sync (no fault recorded) and reload after it. */
  sitOut(ids: string[], why: string): void {
    const { job, deps, members } = this.host;
    for (const id of ids) {
      const m = members.get(id);
      if (!m) continue;
      m.sitsOut = true;
      deps.count('members_sat_out');
    }
    deps.log(`job ${job.id}: ${ids.join(', ')} sit(s) out sync ${job.seq + 1}: ${why}`);
  }
}
