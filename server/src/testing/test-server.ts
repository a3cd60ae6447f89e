// Shared setup for server integration tests: a real server on a loopback port with a fresh SQLite
// directory, HTTP helpers with the researcher token, and simulated volunteers.
import type { JobSpecInput, JobSummary } from '@tabfleet/protocol';
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type RunningServer, type ServerOptions } from '../app';
import { realClock, type Clock } from '../coordinator/types';
import { RingOracle, SimVolunteer, waitFor, type SimOptions } from './sim-volunteer';

export const BASE_JOB: JobSpecInput = {
  preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 2,
  hyperparameters: { lr: 0.1, batchSize: 32 }, minWorkers: 2, maxWorkers: 4, targetSteps: 1000,
};

export interface TestServer extends RunningServer {
  dataDir: string;
  api(path: string, init?: RequestInit & { json?: unknown }): Promise<{ status: number; body: any; text: string }>;
  createJob(spec?: Partial<JobSpecInput>): Promise<JobSummary>;
  /**
   * Waits for the job to reach `state`; on timeout the error says where it stood (state, step, sync,
   * workers, its last rounds) and the server's last log lines, so a stall is diagnosed from CI's log.
   */
  waitForJob(jobId: string, state: JobSummary['state'], timeoutMs: number): Promise<void>;
  volunteer(opts?: Partial<SimOptions>): Promise<SimVolunteer>;
  oracle: RingOracle;
  /** The server's last log lines (kept in memory, not printed), for a failing test's message. */
  logTail(lines?: number): string;
  /** Stops every job still running or waiting (tests call it after each test, so none shares the machine with the next). */
  stopJobs(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A server clock for tests that must see time pass without waiting for it, or not pass while they
 * act: real timers, and a now() that `skip(ms)` moves ahead (a keep-out that has run out, without
 * sleeping through it) and `hold()` stops until the function it returns is called (a flood that
 * arrives at one instant however slowly a busy machine delivers it).
 */
export function skippableClock(): { clock: Clock; skip(ms: number): void; hold(): () => void } {
  let skipped = 0;
  let heldAt: number | null = null;
  const now = () => heldAt ?? realClock.now() + skipped;
  return {
    clock: { now, after: (ms, fn) => realClock.after(ms, fn) },
    skip: (ms) => void (skipped += ms),
    hold: () => {
      heldAt = now();
      return () => void (heldAt = null);
    },
  };
}

/** The JSON body of a response, when it is JSON (else null: CSV, safetensors, plain text). */
function withBody(r: { status: number; text: string }): { status: number; body: any; text: string } {
  let body: unknown = null;
  try {
    body = JSON.parse(r.text);
  } catch {
    /* not JSON */
  }
  return { ...r, body };
}

/** One request on a new connection (no keep-alive socket the server may be closing as it is reused). */
function requestOnFreshConnection(url: string, method: string, headers: Record<string, string>, body: RequestInit['body']): Promise<{ status: number; text: string }> {
  if (body != null && typeof body !== 'string' && !ArrayBuffer.isView(body) && !(body instanceof ArrayBuffer)) {
    throw new Error(`${method} ${url}: the test helper sends string or byte bodies only`);
  }
  const bytes = body == null ? null : typeof body === 'string' ? Buffer.from(body) : ArrayBuffer.isView(body) ? Buffer.from(body.buffer, body.byteOffset, body.byteLength) : Buffer.from(body);
  return new Promise((resolve, reject) => {
    const send = url.startsWith('https:') ? httpsRequest : httpRequest;
    const req = send(url, { method, headers: bytes ? { ...headers, 'content-length': String(bytes.byteLength) } : headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', (e) => reject(new Error(`${method} ${url}: ${e.message}`)));
    req.end(bytes ?? undefined);
  });
}

export async function startTestServer(opts: ServerOptions = {}): Promise<TestServer> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'tabfleet-test-'));
  const logLines: string[] = [];
  const keepLog = (line: string) => {
    // The wall time of day (UTC) first: a stall's lines then line up with the test's own timings.
    logLines.push(`${new Date().toISOString().slice(11, 23)} ${line}`);
    if (logLines.length > 400) logLines.splice(0, logLines.length - 200);
  };
  const server = await startServer({ port: 0, dataDir, token: 'test-token', log: keepLog, timing: { roundTimeoutMs: 5_000, barrierTimeoutMs: 5_000, loadTimeoutMs: 5_000 },
    // Every test volunteer comes from 127.0.0.1: no per-address or per-network rules unless a test sets them.
    addressLimits: { connections: 100_000, jobShare: 1 }, networkRules: false, ...opts });
  const oracle = new RingOracle();
  const sims: SimVolunteer[] = [];
  const api: TestServer['api'] = async (path, init = {}) => {
    const headers: Record<string, string> = { authorization: 'Bearer test-token', ...(init.headers as Record<string, string>) };
    if (init.json !== undefined) headers['content-type'] = 'application/json';
    const body = init.json !== undefined ? JSON.stringify(init.json) : init.body;
    const method = init.method ?? 'GET';
    // Volunteers on the CPU backend in this process can block its event loop for seconds (three
    // evaluate at once); the server then drops an idle keep-alive socket as a request reuses it,
    // which undici reports as ECONNRESET or "other side closed" by turns. A read is safe to send
    // again, so it is retried; a write is not, so it goes on a connection of its own.
    if (method !== 'GET') return withBody(await requestOnFreshConnection(`${server.url}${path}`, method, headers, body));
    let res: Response;
    for (let attempt = 1; ; attempt++) {
      try {
        res = await fetch(`${server.url}${path}`, { ...init, headers, body });
        break;
      } catch (e) {
        if (attempt >= 3) throw new Error(`GET ${path}: ${(e as Error).message} (${String((e as { cause?: unknown }).cause)})`);
        await new Promise((r) => setTimeout(r, 100 * attempt));
      }
    }
    return withBody({ status: res.status, text: await res.text() });
  };
  return {
    ...server,
    dataDir,
    oracle,
    api,
    logTail: (lines = 40) => logLines.slice(-lines).join('\n'),
    async createJob(spec = {}) {
      const r = await api('/api/jobs', { method: 'POST', json: { ...BASE_JOB, ...spec } });
      if (r.status !== 201) throw new Error(`create job: ${r.status} ${r.text}`);
      return r.body.job;
    },
    async waitForJob(jobId, state, timeoutMs) {
      try {
        await waitFor(`job ${jobId} to be ${state}`, async () => (await api(`/api/jobs/${jobId}`)).body.job.state === state, timeoutMs, 200);
      } catch (e) {
        const { job, workers } = (await api(`/api/jobs/${jobId}`)).body as { job: JobSummary; workers: { volunteerId: string; state?: string; step?: number }[] };
        const rounds = ((await api(`/api/jobs/${jobId}/rounds`)).body.rounds as unknown[]).slice(-8);
        throw new Error(`${(e as Error).message}: it is ${job.state} at step ${job.step}, sync ${job.seq}\n` +
          `workers: ${JSON.stringify(workers.map((w) => [w.volunteerId, w.state, w.step]))}\nlast rounds: ${JSON.stringify(rounds)}\nserver log:\n${logLines.slice(-60).join('\n')}`);
      }
    },
    async volunteer(o = {}) {
      const v = new SimVolunteer({ url: server.url, oracle, ...o });
      sims.push(v);
      await v.connected();
      return v;
    },
    async stopJobs() {
      const { jobs } = (await api('/api/jobs')).body as { jobs: { id: string; state: string }[] };
      for (const j of jobs) if (j.state === 'running' || j.state === 'waiting') await api(`/api/jobs/${j.id}/stop`, { method: 'POST' });
    },
    async stop() {
      for (const v of sims) v.close();
      await server.close();
      if (!opts.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
