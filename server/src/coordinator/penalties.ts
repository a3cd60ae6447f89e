// Members removed for a fault are kept out of the job for a while, longer each time. A client id is
// the client's own choice and a fresh one costs nothing, so faults also follow the network the member
// came from (its address, or its prefix where the server tells networks apart, standing.ts):
//   - while an identity is kept out, a newcomer (an identity with no standing) from its network is
//     kept out as long: evicted, it came back at once under a new id (13 syncs in 30 s against 108);
//   - integrity faults past a few keep the whole network out, established identities too.
// Liveness faults alone never keep out identities with standing: an honest but slow tab behind a
// shared address (a campus NAT, a test machine) must not shut out its established neighbours.
// Leaving mid-round is a light fault: counted, and kept out from the third on.
// Every record is stored with the job (store.ts's PenaltyRecord) as it changes and restored when a node
// loads the job, so a restart or a takeover keeps a kept-out member out. Counts are kept after their
// keep-out ends: they set the next one's length.
import type { PenaltyRecord } from '../store/store';

export interface Offence {
  offences: number;
  /** Epoch ms until which it may not rejoin. */
  until: number;
  lastReason: string;
}

/** A fault of timing (missed a deadline), of what it sent (a wrong checkpoint, digest or evaluation), or a departure mid-round. */
export type FaultKind = 'liveness' | 'integrity' | 'departure';

/** First keep-out; doubled per repeat offence. */
export const KEEP_OUT_BASE_MS = 10_000;
export const KEEP_OUT_MAX_MS = 60 * 60_000;
/** Integrity offences from one network (any identity) before the network itself is kept out. */
export const ADDRESS_OFFENCES = 3;
/** Departures mid-round before they keep the identity out (each one is counted). */
export const DEPARTURES_BEFORE_KEEP_OUT = 3;

export class Penalties {
  private readonly byIdentity = new Map<string, Offence>();
  private readonly departures = new Map<string, Offence>();
  private readonly byNetwork = new Map<string, Offence>();
  /** Until when newcomers from a network are kept out (the latest keep-out of an identity from it). */
  private readonly newcomersUntil = new Map<string, { until: number; reason: string }>();
  private readonly maps: Record<Exclude<PenaltyRecord['kind'], 'newcomers'>, Map<string, Offence>> = {
    identity: this.byIdentity, departure: this.departures, network: this.byNetwork,
  };

  /** `save` queues the records a fault changed for the store (the coordinator's ordered writes), as one write. */
  constructor(private readonly save: (records: PenaltyRecord[]) => void = () => {}) {}

  /** Takes back what the store held for the job (before any fault is recorded here). */
  restore(records: PenaltyRecord[]): void {
    for (const r of records) {
      if (r.kind === 'newcomers') this.newcomersUntil.set(r.key, { until: r.until, reason: r.reason });
      else this.maps[r.kind].set(r.key, { offences: r.offences, until: r.until, lastReason: r.reason });
    }
  }

  /**
   * Records a fault against the identity and its network; returns how long the identity is kept out
   * (0: not yet). `newcomersFollow`: newcomers from the network share the keep-out (off where every
   * volunteer is one machine's, which would shut out everyone).
   */
  punish(identity: string, network: string | undefined, reason: string, now: number, kind: FaultKind, newcomersFollow = false): number {
    const own = kind === 'departure' ? 'departure' : 'identity';
    const o = bump(this.maps[own], identity, reason, now, kind === 'departure' ? DEPARTURES_BEFORE_KEEP_OUT : 1);
    const changed: PenaltyRecord[] = [record(own, identity, o)];
    if (network && kind === 'integrity') changed.push(record('network', network, bump(this.byNetwork, network, reason, now, ADDRESS_OFFENCES)));
    if (network && newcomersFollow && o.until > now) {
      const prev = this.newcomersUntil.get(network);
      if (!prev || prev.until < o.until) {
        this.newcomersUntil.set(network, { until: o.until, reason });
        changed.push({ kind: 'newcomers', key: network, offences: 0, until: o.until, reason });
      }
    }
    this.save(changed);
    return Math.max(0, o.until - now);
  }

  /** Why this identity (a newcomer: no standing) from `network` may not join now (null: it may). */
  keptOut(identity: string, network: string | undefined, now: number, newcomer: boolean): string | null {
    for (const o of [this.byIdentity.get(identity), this.departures.get(identity)]) {
      if (o && o.until > now) return `kept out for ${Math.ceil((o.until - now) / 1000)} s more after ${o.offences} fault(s), the last: ${o.lastReason}`;
    }
    const n = network ? this.byNetwork.get(network) : undefined;
    if (n && n.until > now) return `address kept out for ${Math.ceil((n.until - now) / 1000)} s more after ${n.offences} faults from it, the last: ${n.lastReason}`;
    const shadow = network ? this.newcomersUntil.get(network) : undefined;
    if (newcomer && shadow && shadow.until > now) {
      return `a member from your address is kept out for ${Math.ceil((shadow.until - now) / 1000)} s more (${shadow.reason}); new identities from it wait as long`;
    }
    return null;
  }

  offences(identity: string): number {
    return (this.byIdentity.get(identity)?.offences ?? 0) + (this.departures.get(identity)?.offences ?? 0);
  }

  /** The reason of its last fault on record (a timing or integrity fault before a departure mid-round); null: none. */
  lastFault(identity: string): string | null {
    return (this.byIdentity.get(identity) ?? this.departures.get(identity))?.lastReason ?? null;
  }
}

function record(kind: PenaltyRecord['kind'], key: string, o: Offence): PenaltyRecord {
  return { kind, key, offences: o.offences, until: o.until, reason: o.lastReason };
}

/** Counts an offence; the keep-out starts once `threshold` offences are on record. */
function bump(map: Map<string, Offence>, key: string, reason: string, now: number, threshold: number): Offence {
  const o = map.get(key) ?? { offences: 0, until: 0, lastReason: '' };
  o.offences += 1;
  o.lastReason = reason;
  if (o.offences >= threshold) o.until = now + Math.min(KEEP_OUT_MAX_MS, KEEP_OUT_BASE_MS * 2 ** (o.offences - threshold));
  map.set(key, o);
  return o;
}
