// Each member's ICE servers: issued with its assignment, renewed before its TURN credentials expire
// (`ice:refresh`, on the coordinator's clock) for as long as it stays a member. A member that leaves
// or is evicted loses its timer (and a timer that finds its volunteer no longer a member, after the
// job ended, stops), so its credentials run out; one kept out never gets any.
import type { IceServer } from '@tabfleet/protocol';
import type { IceIssuer } from '../ice';
import type { CoordinatorDeps } from './types';

export class IceRenewals {
  private readonly timers = new Map<string, () => void>();

  constructor(private readonly jobId: string, private readonly deps: CoordinatorDeps, private readonly isMember: (volunteerId: string) => boolean) {}

  private get issuer(): IceIssuer | undefined {
    return this.deps.ice?.active ? this.deps.ice : undefined;
  }

  /** The new member's ICE servers (undefined when the server has none); renewals start. */
  issue(volunteerId: string): IceServer[] | undefined {
    const issuer = this.issuer;
    if (!issuer) return undefined;
    this.schedule(volunteerId, issuer);
    return issuer.serversFor(volunteerId);
  }

  private schedule(volunteerId: string, issuer: IceIssuer): void {
    if (!issuer.renews) return;
    this.timers.get(volunteerId)?.();
    this.timers.set(volunteerId, this.deps.clock.after(issuer.renewAfterMs, () => {
      if (!this.timers.has(volunteerId)) return;
      if (!this.isMember(volunteerId)) return void this.timers.delete(volunteerId);
      this.schedule(volunteerId, issuer);
      this.deps.toVolunteer(volunteerId, 'ice:refresh', { jobId: this.jobId, iceServers: issuer.serversFor(volunteerId) });
    }));
  }

  /** No more renewals for this volunteer (it left or was evicted). */
  stop(volunteerId: string): void {
    this.timers.get(volunteerId)?.();
    this.timers.delete(volunteerId);
  }

  stopAll(): void {
    for (const cancel of this.timers.values()) cancel();
    this.timers.clear();
  }
}
