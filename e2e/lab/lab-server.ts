// The real server process (`server/src/main.ts`) inside a public host of the lab, as an operator runs
// it: listening on the host's 203.0.113.x address, STUN and TURN URLs on the command line, the TURN
// secret and the researcher token in its environment, serving https:// under a lab name with a
// certificate from the test CA (lab-tls.ts). The test reaches its HTTP API through a portal.
import type { JobSpecInput, JobSummary } from '@tabfleet/protocol';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from '@tabfleet/headless';
import type { LabHost, NetLab } from '@tabfleet/netlab';
import { BASE_JOB } from '@tabfleet/server/testing';
import type { LabTls } from './lab-tls';

export const SERVER_PORT = 8080;
export const LAB_TOKEN = 'lab-researcher-token-0123456789';

export interface LabServerOptions {
  stun?: string[];
  turn?: string[];
  turnSecret?: string;
  /** More command-line options (`--network-prefix off`, …). */
  args?: string[];
  /** Its name and certificate (--tls-cert, --tls-key, --public-url https://name:port); the test's API calls trust tls.ca. */
  tls: LabTls;
}

export interface LabServer {
  host: LabHost;
  /** What tabs in the lab open: `https://tabfleet.test:8080`. */
  url: string;
  /** The HTTP API as a researcher (the token), from the test process through the portal. */
  api(path: string, init?: { method?: string; json?: unknown }): Promise<{ status: number; body: any; text: string }>;
  createJob(spec?: Partial<JobSpecInput>): Promise<JobSummary>;
  /** Removes its data directory (after the lab, which ends the process, is closed). */
  removeData(): void;
  /** Its last log lines (stdout and stderr), for a failing test's message. */
  logTail(lines?: number): string;
}

export async function startLabServer(lab: NetLab, host: LabHost, opts: LabServerOptions): Promise<LabServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tabfleet-lab-server-'));
  const argv = [process.execPath, '--import', 'tsx', join(repoRoot, 'server/src/main.ts'), '--host', host.address, '--port', String(SERVER_PORT), '--data', dataDir];
  for (const url of opts.stun ?? []) argv.push('--stun', url);
  for (const url of opts.turn ?? []) argv.push('--turn', url);
  const { tls } = opts;
  const url = `https://${tls.name}:${SERVER_PORT}`;
  argv.push('--tls-cert', tls.cert.certPath, '--tls-key', tls.cert.keyPath, '--public-url', url);
  argv.push(...opts.args ?? []);
  const env: NodeJS.ProcessEnv = { ...process.env, TABFLEET_TOKEN: LAB_TOKEN, TABFLEET_TURN_SECRET: opts.turnSecret ?? '' };
  const lines: string[] = [];
  let portal;
  try {
    await serverReady(lab.spawn(host, argv, { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] }), lines);
    portal = await lab.portal(host, host.address, SERVER_PORT);
  } catch (e) {
    rmSync(dataDir, { recursive: true, force: true });
    throw e;
  }
  const { port } = portal;
  const api: LabServer['api'] = async (path, { method = 'GET', json } = {}) => {
    const headers: Record<string, string> = { authorization: `Bearer ${LAB_TOKEN}` };
    if (json !== undefined) headers['content-type'] = 'application/json';
    const { status, text } = await call(tls, { host: '127.0.0.1', port, path, method, headers }, json === undefined ? undefined : JSON.stringify(json));
    let body: unknown = null;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON (a page, /metrics)
    }
    return { status, body, text };
  };
  return {
    host,
    url,
    api,
    async createJob(spec = {}) {
      const r = await api('/api/jobs', { method: 'POST', json: { ...BASE_JOB, ...spec } });
      if (r.status !== 201) throw new Error(`creating a job failed: ${r.status} ${r.text}`);
      return r.body.job as JobSummary;
    },
    removeData: () => rmSync(dataDir, { recursive: true, force: true }),
    logTail: (n = 60) => lines.slice(-n).join('\n'),
  };
}

/**
 * One request through the portal over TLS, the certificate checked against the test CA for the lab name
 * (as a researcher's client would check it); the whole answer as text.
 */
function call(tls: LabTls, opts: { host: string; port: number; path: string; method: string; headers: Record<string, string> }, body?: string):
  Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const done = (res: IncomingMessage) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d)).on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    };
    const req = request({ ...opts, ca: tls.ca, servername: tls.name, agent: false }, done);
    req.on('error', reject);
    req.end(body);
  });
}

/** Keeps the server's output lines (the last thousand or more) and resolves once it says it is ready. */
function serverReady(child: ChildProcess, lines: string[]): Promise<void> {
  let partial = '';
  return new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer) => {
      const parts = (partial + d.toString()).split('\n');
      partial = parts.pop()!;
      for (const line of parts) {
        lines.push(line);
        if (line.startsWith('[server] ready ')) resolve();
      }
      if (lines.length > 2000) lines.splice(0, lines.length - 1000);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`the lab server exited with ${code}:\n${lines.slice(-40).join('\n')}`)));
  });
}
