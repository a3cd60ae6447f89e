// Prometheus's own checker for what the server exports: `promtool` from the Debian package
// `prometheus`, which scripts/setup.mjs installs. Spawned (never spawnSync: a test's server answers
// from the same event loop), its input on stdin or in files.
import { spawn } from 'node:child_process';

export const PROMTOOL_PACKAGE = 'prometheus';

export interface PromtoolResult {
  code: number;
  /** Its stdout and stderr together: lint problems and errors. */
  output: string;
}

/** Runs `promtool ...args` with `stdin`; a missing promtool is an error that names its package. */
export function promtool(args: string[], stdin = ''): Promise<PromtoolResult> {
  return new Promise((resolve, reject) => {
    const child = spawn('promtool', args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const output: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => output.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => output.push(chunk));
    child.on('error', (e: NodeJS.ErrnoException) => {
      reject(e.code === 'ENOENT'
        ? new Error(`promtool is not installed: it comes with the Debian package "${PROMTOOL_PACKAGE}" (node scripts/setup.mjs installs it as root; else apt-get install ${PROMTOOL_PACKAGE})`)
        : e);
    });
    child.on('close', (code) => resolve({ code: code ?? 1, output: Buffer.concat(output).toString() }));
    // promtool may exit before reading all of it (a parse error): that is in its answer, not an error here.
    child.stdin.on('error', () => {});
    child.stdin.end(stdin);
  });
}

/** `promtool check metrics` on an exposition text: exit 0 and nothing said is a pass. */
export function checkMetrics(text: string): Promise<PromtoolResult> {
  return promtool(['check', 'metrics'], text);
}
