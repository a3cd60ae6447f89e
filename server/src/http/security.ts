// What every HTTP response and connection passes before a route sees it: security headers, a token
// bucket per client address, the Host header checked against the server's own names, an Origin check
// for Socket.IO, and URLs redacted before they are logged.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import { hostname } from 'node:os';

/**
 * The built apps are same-origin module scripts and stylesheets; `data:` covers the empty favicon the
 * shared head links. Nothing may frame the pages.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "connect-src 'self'", "worker-src 'self'",
  "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'", "form-action 'self'",
].join('; ');

export const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
};

export function setSecurityHeaders(res: ServerResponse): void {
  for (const [k, v] of Object.entries(SECURITY_HEADERS)) res.setHeader(k, v);
}

/**
 * An `--allow-origin` value as browsers send it in the Origin header (scheme, host, port if not the
 * default; no path), or '*'. Anything else would never match a page and is refused with this error.
 */
export function checkAllowedOrigin(value: string): string {
  const want = `--allow-origin ${JSON.stringify(value)}: want an origin such as https://example.org or http://127.0.0.1:8000 (no path, no trailing slash), or '*'`;
  if (value === '*') return value;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(want);
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.origin !== value) throw new Error(want);
  return value;
}

/**
 * The policy of the embedded contribute frame (`/apps/embed/`): every page's, except that the allowed
 * origins may frame it (`frame-ancestors`), and without X-Frame-Options, which cannot name them. A
 * site not listed gets the browser's refusal to show the frame.
 */
export function setEmbedFrameHeaders(res: ServerResponse, allowed: readonly string[]): void {
  const ancestors = allowed.includes('*') ? "'self' https: http:" : ["'self'", ...allowed].join(' ');
  res.setHeader('content-security-policy', CONTENT_SECURITY_POLICY.replace("frame-ancestors 'none'", `frame-ancestors ${ancestors}`));
  res.removeHeader('x-frame-options');
}

/**
 * The embed script (`/embed/…`) is a module script, which browsers fetch with CORS: any origin may
 * load it, so that a site not allowed still gets the element, which then says it is refused.
 */
export function setEmbedScriptHeaders(res: ServerResponse): void {
  res.setHeader('access-control-allow-origin', '*');
  res.setHeader('cross-origin-resource-policy', 'cross-origin');
}

/** HTTP requests per client address: sustained per second, and the burst a page load may use. */
export interface HttpRateLimit {
  perSecond: number;
  burst: number;
}

export const DEFAULT_HTTP_RATE_LIMIT: HttpRateLimit = { perSecond: 100, burst: 300 };
/**
 * Tokens a failed researcher-token attempt costs (a dashboard handshake or an HTTP request answered
 * 401), besides its own: guessing runs at a tenth of the request rate (10/s at the defaults).
 */
export const FAILED_AUTH_COST = 10;
/** Addresses tracked at once; the fullest (idle) buckets are dropped first when there are more. */
const MAX_TRACKED_ADDRESSES = 10_000;

/** A token bucket per client address. `take` says how long to wait (ms) when the bucket is empty. */
export class AddressRateLimiter {
  private readonly buckets = new Map<string, { tokens: number; last: number }>();

  constructor(private readonly limit: HttpRateLimit, private readonly now: () => number = Date.now) {}

  /** 0 when the request may go on, otherwise the milliseconds until one token is back. */
  take(address: string): number {
    const b = this.bucket(address);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - b.tokens) / this.limit.perSecond) * 1000);
  }

  /** Takes `tokens` more after the fact (a failed token): the bucket may go into debt, down to minus a burst. */
  charge(address: string, tokens: number): void {
    const b = this.bucket(address);
    b.tokens = Math.max(-this.limit.burst, b.tokens - tokens);
  }

  private bucket(address: string): { tokens: number; last: number } {
    const t = this.now();
    let b = this.buckets.get(address);
    if (!b) {
      if (this.buckets.size >= MAX_TRACKED_ADDRESSES) this.dropIdle(t);
      this.buckets.set(address, (b = { tokens: this.limit.burst, last: t }));
    }
    b.tokens = Math.min(this.limit.burst, b.tokens + ((t - b.last) / 1000) * this.limit.perSecond);
    b.last = t;
    return b;
  }

  /** Forgets addresses whose bucket has refilled (they would start full anyway), or all if none has. */
  private dropIdle(t: number): void {
    for (const [addr, b] of this.buckets) {
      if (b.tokens + ((t - b.last) / 1000) * this.limit.perSecond >= this.limit.burst) this.buckets.delete(addr);
    }
    if (this.buckets.size >= MAX_TRACKED_ADDRESSES) this.buckets.clear();
  }
}

/**
 * Reverse proxies (`--trust-proxy`) whose X-Forwarded-For is believed, as addresses (IPv4 also as its
 * `::ffff:` form). Empty by default: a header any client can write never decides whose bucket a request takes from.
 */
export type TrustedProxies = ReadonlySet<string>;

export const NO_TRUSTED_PROXIES: TrustedProxies = new Set();

/** `::ffff:192.0.2.1` (how a dual-stack socket shows an IPv4 peer) as `192.0.2.1`; other addresses as they are. */
export function plainAddress(address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address.toLowerCase();
}

/** `--trust-proxy` values: IP addresses only (a name would be resolved by nobody), or an Error saying so. */
export function trustedProxies(values: readonly string[]): TrustedProxies {
  for (const v of values) if (isIP(v) === 0) throw new Error(`--trust-proxy ${JSON.stringify(v)}: want the proxy's IP address as this server sees it (127.0.0.1, ::1, 10.0.0.2)`);
  return new Set(values.map(plainAddress));
}

/**
 * The address a request comes from: its TCP peer, or, when that peer is a trusted proxy, the nearest
 * address in X-Forwarded-For that is not one (read from the right: what the proxies appended, not
 * what the client wrote at the left). A header with nothing usable leaves the peer's address.
 */
export function clientAddress(req: IncomingMessage, trusted: TrustedProxies = NO_TRUSTED_PROXIES): string {
  const peer = req.socket.remoteAddress ?? 'unknown';
  if (!trusted.has(plainAddress(peer))) return peer;
  const header = req.headers['x-forwarded-for'];
  const hops = (Array.isArray(header) ? header.join(',') : header ?? '').split(',').map((h) => h.trim()).filter(Boolean);
  let address = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i];
    if (isIP(hop) === 0) break;
    address = plainAddress(hop);
    if (!trusted.has(address)) break;
  }
  return address;
}

/** The request's path with its query string replaced, so tokens and tickets never reach a log. */
export function redactUrl(url: string | undefined): string {
  const raw = url ?? '';
  const q = raw.indexOf('?');
  return q < 0 ? raw : `${raw.slice(0, q)}?…`;
}

/**
 * The names in Host headers this server answers to. A page on another name whose DNS the attacker
 * points at this server (DNS rebinding) is same-origin with it as far as the browser knows; the Host
 * header, which still carries the attacker's name, is what tells them apart.
 */
export interface HostPolicy {
  /** Any Host at all (`--allow-host '*'`). */
  any: boolean;
  /** Lower-case names without port. */
  names: ReadonlySet<string>;
}

/**
 * The server's own names: `localhost`, this machine's host name, the listen host and the public
 * URL's host, and `extra` (`--allow-host`; '*' allows any). IP literals are always accepted: no DNS
 * answer can make a page's origin an address, so they cannot be rebound.
 */
export function hostPolicy(opts: { listenHost?: string; publicUrl?: string; extra?: readonly string[] }): HostPolicy {
  const extra = opts.extra ?? [];
  const names = new Set(['localhost', hostname().toLowerCase()]);
  if (opts.listenHost) names.add(opts.listenHost.toLowerCase());
  if (opts.publicUrl) names.add(new URL(opts.publicUrl).hostname.toLowerCase());
  for (const n of extra) if (n !== '*') names.add(n.toLowerCase().replace(/\.$/, ''));
  return { any: extra.includes('*'), names };
}

/** Whether a Host header names this server (`hostPolicy`). A request without one (HTTP/1.0) is no browser's. */
export function hostAllowed(host: string | undefined, policy: HostPolicy): boolean {
  if (host === undefined || policy.any) return true;
  const h = host.trim().toLowerCase();
  const bracketed = /^\[([0-9a-f:.]+)\](?::\d+)?$/.exec(h);
  if (bracketed) return isIP(bracketed[1]) === 6;
  const m = /^([^:]+)(?::\d+)?$/.exec(h);
  if (!m) return false;
  const name = m[1].replace(/\.$/, '');
  return isIP(name) !== 0 || policy.names.has(name);
}

/**
 * Whether a Socket.IO handshake may go on: requests without an Origin header (Node clients, curl) and
 * same-origin pages may, other origins only when listed.
 */
export function originAllowed(req: IncomingMessage, allowed: readonly string[]): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  if (allowed.includes(origin) || allowed.includes('*')) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}
