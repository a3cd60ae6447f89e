// This browser's volunteer identity: a client id made once and kept in localStorage (the server
// credits work to it across reconnects and visits), and the optional display name.
import { displayNameSchema } from '@tabfleet/protocol';

const CLIENT_ID_KEY = 'tabfleet-client-id';
const NAME_KEY = 'tabfleet-display-name';

/** 128 random bits; getRandomValues also works where crypto.randomUUID does not (plain http on a LAN). */
function newClientId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `c-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

export function clientId(): string {
  let id = localStorage.getItem(CLIENT_ID_KEY);
  if (!id || !/^[\w-]{16,64}$/.test(id)) localStorage.setItem(CLIENT_ID_KEY, (id = newClientId()));
  return id;
}

export function savedName(): string | null {
  const name = localStorage.getItem(NAME_KEY);
  return name && displayNameSchema.safeParse(name).success ? name : null;
}

/** Checks and keeps a name ('' clears it); returns the error message when it is refused. */
export function saveName(input: string): { name: string | null } | { error: string } {
  if (input.trim() === '') {
    localStorage.removeItem(NAME_KEY);
    return { name: null };
  }
  const r = displayNameSchema.safeParse(input);
  if (!r.success) return { error: r.error.issues[0].message };
  localStorage.setItem(NAME_KEY, r.data);
  return { name: r.data };
}
