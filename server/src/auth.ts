// Researcher token and checkpoint tickets. The token comes from TABFLEET_TOKEN or is generated at the
// first start and kept in the store (so every node and every restart agree). Tickets let an anonymous
// volunteer download exactly the checkpoint it was told to load, and nothing else.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Store } from './store/store';

export interface Secrets {
  token: string;
  /** True when this start generated the token (print it). */
  generated: boolean;
  tokenMatches(candidate: string): boolean;
  ticket(jobId: string, seq: number): string;
  ticketMatches(jobId: string, seq: number, candidate: string): boolean;
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

export async function loadSecrets(store: Store, envToken: string | undefined): Promise<Secrets> {
  const token = envToken ? { value: envToken, generated: false } : await setting(store, 'researcher_token', () => randomBytes(18).toString('base64url'));
  const { value: ticketKey } = await setting(store, 'ticket_key', () => randomBytes(32).toString('hex'));
  const ticket = (jobId: string, seq: number) => createHmac('sha256', ticketKey).update(`${jobId}:${seq}`).digest('base64url').slice(0, 32);
  return {
    token: token.value,
    generated: token.generated,
    tokenMatches: (candidate) => safeEqual(candidate, token.value),
    ticket,
    ticketMatches: (jobId, seq, candidate) => safeEqual(candidate, ticket(jobId, seq)),
  };
}
