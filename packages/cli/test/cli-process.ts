// Runs the real `tabfleet` bin as a child process (asynchronously: the test runner's shared browser is
// served from the parent's event loop) with a clean environment: its own HOME and config file, and no
// TABFLEET_* variables from the caller.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startTestServer, type TestServer } from '@tabfleet/server/testing';

export const BIN = fileURLToPath(new URL('../bin/tabfleet.mjs', import.meta.url));

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliHome {
  dir: string;
  config: string;
  env: Record<string, string>;
}

const homes: string[] = [];
process.once('exit', () => homes.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

/** A fresh HOME with TABFLEET_CONFIG inside it (removed when the test process exits). */
export function cliHome(): CliHome {
  const dir = mkdtempSync(join(tmpdir(), 'tabfleet-cli-'));
  homes.push(dir);
  const config = join(dir, 'config', 'tabfleet.json');
  return { dir, config, env: { HOME: dir, TABFLEET_CONFIG: config } };
}

export function runCli(args: string[], opts: { env?: Record<string, string>; cwd?: string; stdin?: string } = {}): Promise<CliRun> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('TABFLEET_'))) as Record<string, string>;
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...env, ...opts.env }, cwd: opts.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
  const out: Buffer[] = [], err: Buffer[] = [];
  child.stdout.on('data', (c: Buffer) => out.push(c));
  child.stderr.on('data', (c: Buffer) => err.push(c));
  child.stdin.end(opts.stdin ?? '');
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }));
  });
}

/** The run's stdout as the one JSON document --json promises (throws, showing the output, when it is not). */
export function jsonOf(run: CliRun): any {
  try {
    return JSON.parse(run.stdout);
  } catch {
    throw new Error(`stdout is not one JSON document (exit ${run.code}):\n${run.stdout}\nstderr:\n${run.stderr}`);
  }
}

/** Every stdout line as JSON (watch --json). */
export function jsonLines(run: CliRun): any[] {
  return run.stdout.trim().split('\n').filter(Boolean).map((l) => {
    try {
      return JSON.parse(l);
    } catch {
      throw new Error(`not a JSON line: ${l}\nstderr:\n${run.stderr}`);
    }
  });
}

/** A line for a failing assertion. */
export const shown = (run: CliRun) => `exit ${run.code}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`;

/** A file's real test server, and a CLI home whose environment points at it with the researcher token. */
export interface CliAgainstServer {
  server: TestServer;
  env: Record<string, string>;
  dir: string;
}

/** Starts a test server before the file's tests and stops it after; `ready` gets it with a fresh CLI home. */
export function cliAgainstTestServer(ready: (ctx: CliAgainstServer) => void): void {
  let server: TestServer | undefined;
  before(async () => {
    server = await startTestServer();
    const home = cliHome();
    ready({ server, dir: home.dir, env: { ...home.env, TABFLEET_SERVER: server.url, TABFLEET_TOKEN: 'test-token' } });
  });
  after(() => server?.stop());
}
