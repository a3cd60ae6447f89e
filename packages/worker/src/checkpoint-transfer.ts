// A checkpoint to or from the server over HTTP in pieces, so a model of any size never travels as one
// Socket.IO message and a dropped connection costs only what was in flight. An upload is PUT in
// chunks to the URL the server handed the round's uploader, resumed after a failure from what the
// server says it holds; a model load is fetched with Range requests from where a dropped one stopped.
import { realClock, sleepOn, type Clock } from '@tabfleet/protocol';

/** Bytes per PUT: small enough that a dropped one costs little, large enough that a GiB takes a few hundred requests. */
export const UPLOAD_CHUNK_BYTES = 4 * 2 ** 20;
/** Failed requests in a row (no byte gained between them) before a transfer gives up. */
const ATTEMPTS = 5;

class HttpRefusal extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

/** A refusal that asking again cannot change (a wrong token, a file the server refused): not retried. */
const final = (e: unknown) => e instanceof HttpRefusal && e.status !== 429 && e.status !== 503 && e.status !== 409;

async function refusal(what: string, res: Response): Promise<HttpRefusal> {
  return new HttpRefusal(res.status, `${what}: HTTP ${res.status} ${await res.text().catch(() => '')}`.trim());
}

/** The requests a transfer makes: the platform's `fetch` unless a caller brings its own (the coordinator bench's lighter one). */
export type Fetch = (url: string, init?: RequestInit) => Promise<Response>;

/** Sends `data` to an upload URL in chunks; after a failed chunk asks the server what it holds and goes on from there. */
export async function putCheckpoint(url: string, token: string, data: Uint8Array, clock: Clock = realClock, fetch: Fetch = globalThis.fetch): Promise<void> {
  const auth = { authorization: `Bearer ${token}` };
  let sent = 0;
  for (let failures = 0; sent < data.byteLength; ) {
    const end = Math.min(sent + UPLOAD_CHUNK_BYTES, data.byteLength);
    try {
      const res = await fetch(url, {
        method: 'PUT', body: data.slice(sent, end), headers: { ...auth, 'content-type': 'application/octet-stream', 'content-range': `bytes ${sent}-${end - 1}/${data.byteLength}` },
      });
      if (!res.ok) throw await refusal(`PUT checkpoint bytes ${sent}-${end - 1}`, res);
      sent = ((await res.json()) as { received: number }).received;
      failures = 0;
    } catch (e) {
      if (final(e) || ++failures >= ATTEMPTS) throw e;
      await sleepOn(clock, 250 * 2 ** failures);
      // Part of the chunk may have arrived before the failure: the server says where to go on from.
      const res = await fetch(url, { headers: auth }).catch(() => null);
      if (res?.ok) sent = ((await res.json()) as { received: number }).received;
    }
  }
}

/** Counts the bytes of a download as they come in (the heartbeat reports them while a tab loads). */
export type OnBytes = (bytes: number) => void;

/** A response's whole body, each piece counted as it arrives. */
export async function readCounted(res: Response, onBytes: OnBytes): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let length = 0;
  const reader = res.body!.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    length += value.byteLength;
    onBytes(value.byteLength);
  }
  if (parts.length === 1) return parts[0];
  const out = new Uint8Array(length);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/**
 * A stored checkpoint (or any file served with Range), resumed from the bytes in hand when the
 * connection drops. An aborted `signal` stops it at once (no retry): it rejects with the signal's reason.
 */
export async function fetchModel(url: string, clock: Clock = realClock, onBytes: OnBytes = () => {}, signal?: AbortSignal): Promise<Uint8Array> {
  // Filled in place as bytes arrive: one copy of the model, however many responses it took.
  let out: Uint8Array | null = null;
  let got = 0;
  for (let failures = 0; out === null || got < out.byteLength; ) {
    try {
      const res = await fetch(url, { signal, ...(got ? { headers: { range: `bytes=${got}-` } } : {}) });
      if (!res.ok) throw await refusal(`GET model from byte ${got}`, res);
      if (got && res.status !== 206) throw new HttpRefusal(res.status, `GET model: the server ignored the range from byte ${got}`);
      if (out === null) {
        const total = Number(res.headers.get('content-length') ?? NaN);
        // No length known: one response is the whole file.
        if (!Number.isInteger(total)) return await readCounted(res, onBytes);
        out = new Uint8Array(total);
      }
      const reader = res.body!.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (got + value.byteLength > out.byteLength) throw new HttpRefusal(res.status, `GET model: more than the ${out.byteLength} bytes announced`);
        out.set(value, got);
        got += value.byteLength;
        onBytes(value.byteLength);
        failures = 0;
      }
      if (got < out.byteLength) throw new Error(`GET model: the response ended at byte ${got} of ${out.byteLength}`);
    } catch (e) {
      if (signal?.aborted) throw signal.reason;
      if (final(e) || ++failures >= ATTEMPTS) throw e;
      await sleepOn(clock, 250 * 2 ** failures);
    }
  }
  return out;
}
