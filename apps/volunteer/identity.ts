// This browser's volunteer identity: a client id made once and kept in localStorage (the server
// credits work to it across reconnects and visits), and the optional display name. Where the browser
// keeps no storage for the page (a third-party frame, as the contribute widget is, in a browser that
// blocks third-party storage) the id lasts for this page's visit, and no name is kept.
import { displayNameSchema } from '@tabfleet/protocol';

const CLIENT_ID_KEY = 'tabfleet-client-id';
const NAME_KEY = 'tabfleet-display-name';
let visitId: string | null = null;

/** 128 random bits; getRandomValues also works where crypto.randomUUID does not (plain http on a LAN). */
function newClientId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `c-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/** localStorage, or null where reading it throws (the browser denies this document storage). */
function storage(): Storage | null {
  try {
    return window.localStorage;
  } catch {
    return null;
  }
}

/** Whether the id (and name) outlive this visit: false where the browser keeps no storage for the page. */
export function identityKept(): boolean {
  return storage() !== null;
}

export function clientId(): string {
  const store = storage();
  if (!store) return (visitId ??= newClientId());
  let id = store.getItem(CLIENT_ID_KEY);
  if (!id || !/^[\w-]{16,64}$/.test(id)) store.setItem(CLIENT_ID_KEY, (id = newClientId()));
  return id;
}

export function savedName(): string | null {
  const name = storage()?.getItem(NAME_KEY);
  return name && displayNameSchema.safeParse(name).success ? name : null;
}

/** Checks and keeps a name ('' clears it); returns the error message when it is refused. */
export function saveName(input: string): { name: string | null } | { error: string } {
  const store = storage();
  if (!store) return { error: 'this browser keeps no data for this page' };
  if (input.trim() === '') {
    store.removeItem(NAME_KEY);
    return { name: null };
  }
  const r = displayNameSchema.safeParse(input);
  if (!r.success) return { error: r.error.issues[0].message };
  store.setItem(NAME_KEY, r.data);
  return { name: r.data };
}
