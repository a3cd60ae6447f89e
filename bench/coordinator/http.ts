// The server's HTTP side as the coordinator benchmark uses it: /metrics gauges and job creation.
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
