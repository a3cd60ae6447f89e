// The ICE servers volunteers' peer links use: STUN URLs as given, and TURN URLs with per-volunteer,
// short-lived credentials in coturn's REST-API scheme (`use-auth-secret`, draft-uberti-behave-turn-rest):
// username "<expiry unix seconds>:<volunteer id>", password base64(HMAC-SHA1(shared secret, username)).
// coturn recomputes the password from the secret it shares with this server and refuses (401) a
// username whose expiry has passed, so nothing is stored and a leaked credential dies on its own.
import type { IceServer } from '@tabfleet/protocol';
import { createHmac } from 'node:crypto';
import type { Clock } from './coordinator/types';

export interface IceOptions {
  /** `stun:host[:port]` or `stuns:…` (RFC 7064). */
  stun?: string[];
  /** `turn:host[:port][?transport=udp|tcp]` or `turns:…` (RFC 7065); needs `turnSecret`. */
  turn?: string[];
  /** coturn's `static-auth-secret`. Never logged, sent, or put in an error message. */
  turnSecret?: string;
  /** How long a volunteer's TURN credentials stay valid, seconds (default 3600). */
  credentialLifetimeS?: number;
}

export const DEFAULT_CREDENTIAL_LIFETIME_S = 3600;
/** Shorter lifetimes would renew faster than a slow tab can use them. */
export const MIN_CREDENTIAL_LIFETIME_S = 60;
/** Credentials are renewed at this share of their lifetime, so a link opened just before still works. */
export const RENEW_AT = 2 / 3;

const HOST = String.raw`(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)`;
const STUN_URL = new RegExp(String.raw`^stuns?:${HOST}(?::(\d{1,5}))?$`);
const TURN_URL = new RegExp(String.raw`^turns?:${HOST}(?::(\d{1,5}))?(?:\?transport=(?:udp|tcp))?$`);

/** Throws a clear error for a URL that is not a STUN (or TURN) server's; returns it unchanged. */
export function checkIceUrl(url: string, kind: 'stun' | 'turn'): string {
  const m = (kind === 'stun' ? STUN_URL : TURN_URL).exec(url);
  const port = m?.[2] === undefined ? 1 : Number(m[2]);
  if (!m || port < 1 || port > 65535) {
    const want = kind === 'stun' ? 'stun:host[:port] or stuns:host[:port]' : 'turn:host[:port][?transport=udp|tcp] or turns:…';
    throw new Error(`--${kind} ${JSON.stringify(url.slice(0, 200))}: want ${want}`);
  }
  return url;
}

/** coturn's REST-API credentials for `volunteerId`, valid until `expiresAtS` (unix seconds). */
export function turnCredentials(secret: string, volunteerId: string, expiresAtS: number): { username: string; credential: string } {
  const username = `${expiresAtS}:${volunteerId}`;
  return { username, credential: createHmac('sha1', secret).update(username).digest('base64') };
}

/** Issues each volunteer its ICE servers. The secret lives in a private field, out of logs and JSON. */
export class IceIssuer {
  readonly #secret: string;
  readonly stun: readonly string[];
  readonly turn: readonly string[];
  readonly lifetimeS: number;

  constructor(opts: IceOptions, private readonly clock: Clock) {
    this.stun = (opts.stun ?? []).map((u) => checkIceUrl(u, 'stun'));
    this.turn = (opts.turn ?? []).map((u) => checkIceUrl(u, 'turn'));
    this.lifetimeS = opts.credentialLifetimeS ?? DEFAULT_CREDENTIAL_LIFETIME_S;
    if (!(Number.isInteger(this.lifetimeS) && this.lifetimeS >= MIN_CREDENTIAL_LIFETIME_S)) {
      throw new Error(`--turn-ttl ${this.lifetimeS}: want whole seconds, at least ${MIN_CREDENTIAL_LIFETIME_S}`);
    }
    if (this.turn.length && !opts.turnSecret) throw new Error('--turn needs the TURN shared secret in $TABFLEET_TURN_SECRET (coturn\'s static-auth-secret)');
    this.#secret = opts.turnSecret ?? '';
  }

  /** Whether volunteers get any ICE servers (else links use host candidates only, as before). */
  get active(): boolean {
    return this.stun.length + this.turn.length > 0;
  }

  /** Whether credentials need renewing (TURN servers are configured). */
  get renews(): boolean {
    return this.turn.length > 0;
  }

  /** How long after issuing credentials the next ones are sent, ms. */
  get renewAfterMs(): number {
    return Math.floor(this.lifetimeS * 1000 * RENEW_AT);
  }

  /** STUN servers, then TURN servers with fresh credentials for `volunteerId`. */
  serversFor(volunteerId: string): IceServer[] {
    const servers: IceServer[] = [];
    if (this.stun.length) servers.push({ urls: [...this.stun] });
    if (this.turn.length) {
      const expiresAtS = Math.floor(this.clock.now() / 1000) + this.lifetimeS;
      servers.push({ urls: [...this.turn], ...turnCredentials(this.#secret, volunteerId, expiresAtS) });
    }
    return servers;
  }

  /** What the log says: the URLs, never the secret. */
  describe(): string {
    return [...this.stun, ...this.turn.map((u) => `${u} (credentials valid ${this.lifetimeS} s)`)].join(', ') || 'none';
  }
}
