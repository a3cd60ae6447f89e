// Members removed for a fault are kept out of the job for a while, longer each time: by identity
// (the browser's client id) and, for faults of integrity past a few, by address, since a client id
// is the client's own choice and a fresh one costs nothing. Every fault is counted and logged with why.
export interface Offence {
  offences: number;
  /** Epoch ms until which it may not rejoin. */
  until: number;
  lastReason: string;
}

/** First keep-out; doubled per repeat offence. */
export const KEEP_OUT_BASE_MS = 10_000;
export const KEEP_OUT_MAX_MS = 60 * 60_000;
/** Offences from one address (any identity) before the address itself is kept out. */
export const ADDRESS_OFFENCES = 3;

export class Penalties {
  private readonly byIdentity = new Map<string, Offence>();
  private readonly byAddress = new Map<string, Offence>();

  /** Records a fault (against `address` too when given); returns how long the offender is kept out. */
  punish(identity: string, address: string | undefined, reason: string, now: number): number {
    const o = bump(this.byIdentity, identity, reason, now, 1);
    if (address) bump(this.byAddress, address, reason, now, ADDRESS_OFFENCES);
    return o.until - now;
  }

  /** Why this identity or address may not join now (null: it may). */
  keptOut(identity: string, address: string | undefined, now: number): string | null {
    const o = this.byIdentity.get(identity);
    if (o && o.until > now) return `kept out for ${Math.ceil((o.until - now) / 1000)} s more after ${o.offences} fault(s), the last: ${o.lastReason}`;
    const a = address ? this.byAddress.get(address) : undefined;
    if (a && a.until > now) return `address kept out for ${Math.ceil((a.until - now) / 1000)} s more after ${a.offences} faults from it, the last: ${a.lastReason}`;
    return null;
  }

  offences(identity: string): number {
    return this.byIdentity.get(identity)?.offences ?? 0;
  }
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
