// Researcher token and tickets. The token comes from TABFLEET_TOKEN or is generated at the first start
// and kept in the store (so every node and every restart agree). Tickets let an anonymous volunteer
// download exactly what it was told to (one checkpoint, its data shard) for a limited time, and nothing
// else: each is `<expiry ms>.<HMAC of what it grants and the expiry>`, so changing either breaks it.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Store } from './store/store';

/** Shortest researcher token accepted from the environment. */
export const MIN_TOKEN_LENGTH = 16;
/** How long a ticket stays valid by default (a model load must finish within ROUND_TIMING.loadTimeoutMs). */
export const DEFAULT_TICKET_LIFETIME_MS = 10 * 60_000;

export class WeakTokenError extends Error {
  constructor() {
    super(`TABFLEET_TOKEN is too weak: use at least ${MIN_TOKEN_LENGTH} characters (e.g. \`openssl rand -base64 24\`), or unset it to have one generated`);
    this.name = 'WeakTokenError';
  }
}

export interface Secrets {
  token: string;
  /** True when this start generated the token (print it). */
  generated: boolean;
  tokenMatches(candidate: string): boolean;
  /** A ticket for checkpoint `seq` of `jobId`, valid for the ticket lifetime from now. */
  ticket(jobId: string, seq: number): string;
  ticketMatches(jobId: string, seq: number, candidate: string): boolean;
  /** A ticket for one data shard of one job (`what` names the shard: dataset, index, count, seed). */
  shardTicket(jobId: string, what: string): string;
  shardTicketMatches(jobId: string, what: string, candidate: string): boolean;
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a), y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

async function setting(store: Store, key: string, make: () => string): Promise<{ value: string; generated: boolean }> {
  const existing = await store.getSetting(key);
  if (existing) return { value: existing, generated: false };
  const value = make();
  await store.setSetting(key, value);
  return { value, generated: true };
}

/** Throws WeakTokenError for a token an operator set that is too short to resist guessing. */
export function checkTokenStrength(token: string): void {
  if (token.length < MIN_TOKEN_LENGTH) throw new WeakTokenError();
}

export async function loadSecrets(
  store: Store,
  token: { value: string | undefined; fromEnv: boolean },
  opts: { ticketLifetimeMs?: number; now?: () => number } = {},
): Promise<Secrets> {
  if (token.value && token.fromEnv) checkTokenStrength(token.value);
  const researcher = token.value ? { value: token.value, generated: false } : await setting(store, 'researcher_token', () => randomBytes(18).toString('base64url'));
  const { value: ticketKey } = await setting(store, 'ticket_key', () => randomBytes(32).toString('hex'));
  const lifetime = opts.ticketLifetimeMs ?? DEFAULT_TICKET_LIFETIME_MS;
  const now = opts.now ?? Date.now;
  const mac = (grant: string, expiry: number) => createHmac('sha256', ticketKey).update(`${grant}|${expiry}`).digest('base64url').slice(0, 32);
  const issue = (grant: string) => {
    const expiry = now() + lifetime;
    return `${expiry}.${mac(grant, expiry)}`;
  };
  const verify = (grant: string, candidate: string) => {
    const m = /^(\d{1,15})\.([\w-]{32})$/.exec(candidate);
    if (!m || Number(m[1]) < now()) return false;
    return safeEqual(m[2], mac(grant, Number(m[1])));
  };
  return {
    token: researcher.value,
    generated: researcher.generated,
    tokenMatches: (candidate) => safeEqual(candidate, researcher.value),
    ticket: (jobId, seq) => issue(`checkpoint:${jobId}:${seq}`),
    ticketMatches: (jobId, seq, candidate) => verify(`checkpoint:${jobId}:${seq}`, candidate),
    shardTicket: (jobId, what) => issue(`shard:${jobId}:${what}`),
    shardTicketMatches: (jobId, what, candidate) => verify(`shard:${jobId}:${what}`, candidate),
  };
}
