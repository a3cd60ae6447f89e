// The server's HTTP side as the coordinator benchmark uses it: /metrics gauges, job creation, and the
// simulated volunteers' checkpoint uploads.
import { request as httpRequest } from 'node:http';
import type { JobSpecInput } from '@tabfleet/protocol';

export interface Scrape {
  volunteersConnected: number;
  rssBytes: number;
  heapUsedBytes: number;
}

export async function scrape(url: string): Promise<Scrape> {
  const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(15_000) });
  if (!res.ok) throw new Error(`/metrics: HTTP ${res.status}`);
  const text = await res.text();
  const gauge = (name: string) => {
    const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
    if (!m) throw new Error(`/metrics has no ${name}`);
    return Number(m[1]);
  };
  // The process's memory under the names every Node exporter (prom-client) gives it.
  return { volunteersConnected: gauge('tabfleet_volunteers_connected'), rssBytes: gauge('process_resident_memory_bytes'), heapUsedBytes: gauge('nodejs_heap_size_used_bytes') };
}

export async function createJob(url: string, token: string, spec: JobSpecInput): Promise<string> {
  const res = await fetch(`${url}/api/jobs`, {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(spec), signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  if (res.status !== 201) throw new Error(`POST /api/jobs: ${res.status} ${text}`);
  return JSON.parse(text).job.id;
}

/**
 * Node loads `Response` and `Headers` (undici) on their first use, tens of ms of CPU: a client process
 * calls this when it starts, so that load is not paid inside its first window with an upload.
 */
export function warmLightFetch(): void {
  void new Response(new Headers().get('x'));
}

/**
 * `fetch` for the simulated volunteers' checkpoint uploads, on node:http: the same requests (method,
 * headers, body with its Content-Length), answered as a `Response`. Node's own fetch took 6–13 ms of
 * CPU per 795 KiB PUT and 88 ms to load on its first call, against 3 ms here (both ends, measured on
 * this 2-core machine): time a tab on its own machine spends, which here came out of the server's.
 */
export function lightFetch(url: string, init: RequestInit = {}): Promise<Response> {
  const body = init.body === undefined || init.body === null ? null : init.body;
  if (!url.startsWith('http://')) return Promise.reject(new TypeError(`lightFetch speaks plain HTTP (the bench's servers), not ${url.slice(0, 8)}…`));
  if (body !== null && !(body instanceof Uint8Array)) return Promise.reject(new TypeError('lightFetch sends a Uint8Array body or none'));
  const headers: Record<string, string | number> = { ...(init.headers as Record<string, string> | undefined) };
  if (body) headers['content-length'] = body.byteLength;
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: init.method ?? 'GET', headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => {
        const out = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') out.set(k, v);
        resolve(new Response(res.statusCode === 204 ? null : Buffer.concat(parts), { status: res.statusCode ?? 500, headers: out }));
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body ?? undefined);
  });
}
