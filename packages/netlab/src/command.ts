// Asynchronous commands for the lab: the lab's setup and tests never block the event loop (servers,
// browsers and the test runner's shared browser live on it), so no spawnSync anywhere.
import { spawn } from 'node:child_process';

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  /** Written to the command's stdin, which is then closed. */
  input?: string;
  /** Resolve with the result instead of rejecting when the exit code is not 0. */
  allowFailure?: boolean;
}

/** Runs argv to its end and collects its output; rejects with the command and its stderr on failure. */
export function runCommand(argv: string[], opts: RunOptions = {}): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.once('error', (err) => reject(new Error(`${argv.join(' ')}: ${err.message}`)));
    child.once('close', (code, signal) => {
      const result = { code: code ?? -1, stdout, stderr };
      if (result.code === 0 || opts.allowFailure) resolve(result);
      else reject(new Error(`${argv.join(' ')} failed (${signal ?? `exit ${code}`}): ${stderr.trim() || stdout.trim()}`));
    });
    child.stdin.on('error', () => {}); // a command that exits without reading its input
    child.stdin.end(opts.input ?? '');
  });
}

/** Names of the network namespaces on this machine (`ip netns list`). */
export async function listNamespaces(): Promise<string[]> {
  const { stdout } = await runCommand(['ip', 'netns', 'list']);
  return stdout.split('\n').map((line) => line.split(' ')[0]).filter((name) => name.length > 0);
}
