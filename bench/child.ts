// Runs `bench/run.ts` as `npm run bench` does, in its own process with its own Chromium (a benchmark
// wants the browser to itself, so TABFLEET_BROWSER_WS is not passed on). Killed if the test is
// cancelled or times out, so a stuck run cannot keep the test runner alive.
import { spawn } from 'node:child_process';
import { repoRoot } from '@tabfleet/headless';

export function runBench(args: string[], signal: AbortSignal): Promise<number> {
  const env = { ...process.env };
  delete env.TABFLEET_BROWSER_WS;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/run.ts', ...args], { cwd: repoRoot, stdio: 'inherit', env, signal });
    child.on('error', reject);
    child.on('exit', (code, sig) => resolve(code ?? (sig ? 128 : 1)));
  });
}
