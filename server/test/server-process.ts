// The real server (`server/src/main.ts`) as a child process for tests of its command line: started with
// a fresh data directory, its stdout and stderr collected, ready once it prints "[server] ready".
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const repo = join(import.meta.dirname, '../..');

export interface ServerProcess {
  readonly child: ChildProcess;
  /** Its data directory (removed by stop). */
  readonly data: string;
  /** Everything it printed so far. */
  output(): string;
  /** SIGTERM, waits for the exit, removes the data directory. */
  stop(): Promise<void>;
}

/** `args` come after `--port 0 --data DIR`; `env` is added to this process's (a researcher token is set). */
export async function startServerProcess(args: string[], env: Record<string, string> = {}): Promise<ServerProcess> {
  const data = mkdtempSync(join(tmpdir(), 'tabfleet-server-process-'));
  const child = spawn(process.execPath, ['--import', 'tsx', 'server/src/main.ts', '--port', '0', '--data', data, ...args], {
    cwd: repo, env: { ...process.env, TABFLEET_TOKEN: 'cli-test-token-0123456789', ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
    rmSync(data, { recursive: true, force: true });
  };
  try {
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', () => out.includes('[server] ready') && resolve());
      child.once('exit', (code) => reject(new Error(`the server exited with ${code}: ${out}`)));
    });
  } catch (e) {
    await stop();
    throw e;
  }
  return { child, data, output: () => out, stop };
}
