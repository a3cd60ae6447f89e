// Helpers for tests over the lab: probe servers and clients (probe.mjs) in its namespaces, and polling.
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { LabHost, NetLab } from '../lab';

const PROBE = fileURLToPath(new URL('./probe.mjs', import.meta.url));

/** A probe server running in a namespace, and the JSON lines it printed so far. */
export interface ProbeServer {
  child: ChildProcess;
  lines: Array<Record<string, unknown>>;
}

/** Starts a probe server (udp-echo, tcp-echo, tcp-sink) and waits until it listens. */
export async function startProbe(lab: NetLab, host: LabHost, args: string[]): Promise<ProbeServer> {
  const child = lab.spawn(host, [process.execPath, PROBE, ...args]);
  const server: ProbeServer = { child, lines: [] };
  let buffered = '';
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  child.stdout!.on('data', (d) => {
    buffered += d;
    const parts = buffered.split('\n');
    buffered = parts.pop()!;
    for (const part of parts) server.lines.push(JSON.parse(part));
  });
  await new Promise<void>((resolve, reject) => {
    const exited = (code: number | null) => reject(new Error(`probe ${args.join(' ')} in ${host.ns} exited ${code}: ${stderr}`));
    child.once('exit', exited);
    void waitFor(() => server.lines.some((l) => 'listening' in l)).then(() => {
      child.off('exit', exited);
      resolve();
    });
  });
  return server;
}

/** Runs a probe client (udp-ask, tcp-ask, tcp-send) to its end; its JSON result, errors included. */
export async function askProbe(lab: NetLab, host: LabHost, args: string[]): Promise<Record<string, unknown>> {
  const { stdout, stderr, code } = await lab.exec(host, [process.execPath, PROBE, ...args], { allowFailure: true });
  const last = stdout.trim().split('\n').at(-1);
  if (!last) {
    if (code === 0) return {};
    throw new Error(`probe ${args.join(' ')} in ${host.ns} exited ${code}: ${stderr}`);
  }
  return JSON.parse(last);
}

/** Starts a probe client that may never finish (a blocked path); the test kills it. */
export function spawnProbe(lab: NetLab, host: LabHost, args: string[]): ChildProcess {
  return lab.spawn(host, [process.execPath, PROBE, ...args]);
}

/** Polls until the condition holds; the test runner's timeout bounds it. */
export async function waitFor(condition: () => boolean | Promise<boolean>, everyMs = 50): Promise<void> {
  while (!(await condition())) await new Promise((r) => setTimeout(r, everyMs));
}

/** The port of an `address:port`. */
export function portOf(endpoint: unknown): number {
  return Number(String(endpoint).split(':').at(-1));
}

/** The address of an `address:port`. */
export function addressOf(endpoint: unknown): string {
  const s = String(endpoint);
  return s.slice(0, s.lastIndexOf(':'));
}
