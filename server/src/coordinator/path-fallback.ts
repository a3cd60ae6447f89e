// Which path a sync takes: the members' peer links (a ring, or a group in untrusted jobs) or the star
// through the server. Peers come first. Two failed peer rounds in one sync, or one whose members' claims
// that they cannot reach each other were corroborated, send that sync through the star. When such a
// star sync commits, the next syncs skip the peer attempt: 1, then 2, 4, … up to MAX_SKIPPED_SYNCS each
// time peers fail again, so members whose links never open (NATs without TURN) do not pay a failed
// peer attempt (seconds, up to its deadline) every sync. A peer sync that commits starts over at 1.
import type { RoundBegin } from '@tabfleet/protocol';

/** Failed peer rounds within one sync before that sync falls back to the star. */
export const PEER_FAILURES_BEFORE_STAR = 2;
/** The longest run of star syncs before peers are tried again. */
export const MAX_SKIPPED_SYNCS = 32;

export class PathFallback {
  /** Peer rounds failed since the last commit. */
  private failures = 0;
  /** A peer round of this sync failed because its members could not link (claims corroborated). */
  private unreachable = false;
  /** Star syncs still to run before peers are tried again. */
  private skipping = 0;
  /** How many syncs the next fallback skips. */
  private nextSkip = 1;

  peerRoundFailed(corroboratedUnreachable = false): void {
    this.failures++;
    if (corroboratedUnreachable) this.unreachable = true;
  }

  /** Whether the next round goes through the server. */
  get useStar(): boolean {
    return this.unreachable || this.failures >= PEER_FAILURES_BEFORE_STAR || this.skipping > 0;
  }

  /** Star syncs left before peers are tried again (for the job's log). */
  get skippedAhead(): number {
    return this.skipping;
  }

  /** A sync committed through `mode`. */
  committed(mode: RoundBegin['mode']): void {
    if (mode !== 'star') {
      this.skipping = 0;
      this.nextSkip = 1;
    } else if (this.skipping > 0) {
      this.skipping--;
    } else if (this.unreachable || this.failures >= PEER_FAILURES_BEFORE_STAR) {
      this.skipping = this.nextSkip;
      this.nextSkip = Math.min(2 * this.nextSkip, MAX_SKIPPED_SYNCS);
    }
    this.failures = 0;
    this.unreachable = false;
  }
}
