// `npm test`: type-check, then every *.test.ts through Node's test runner. Browser tests inside it
// share one headless Chromium, launched here and reached through TABFLEET_BROWSER_WS.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, dirname, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const roots = ['packages', 'server', 'apps', 'e2e', 'bench', 'scripts'];

function findTests(dir, out = []) {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist') continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) findTests(p, out);
    else if (name.endsWith('.test.ts')) out.push(relative(root, p));
  }
  return out;
}

const filter = process.argv.slice(2);
const files = roots.filter((r) => existsSync(join(root, r))).flatMap((r) => findTests(join(root, r))).filter((f) => filter.length === 0 || filter.some((x) => f.includes(x)));
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}

console.log('[test] type-checking');
const tsc = spawnSync('npx', ['tsc', '--noEmit', '-p', 'tsconfig.json'], { cwd: root, stdio: 'inherit' });
if (tsc.status !== 0) process.exit(tsc.status ?? 1);

const { launchSharedBrowser } = await import('@tabfleet/headless/chromium');
const browser = await launchSharedBrowser();
console.log(`[test] running ${files.length} test files`);
// Asynchronous on purpose: the shared browser's WebSocket is served from this process's event loop,
// so a blocking spawnSync would hang every browser test.
// A test that hangs fails after TEST_TIMEOUT_MS (tests that need longer say so); a file whose tests
// are done exits even if something it started still holds a handle; and the whole run is stopped
// at RUN_LIMIT_MS, so a hang is a red run with a message rather than a CI timeout.
const TEST_TIMEOUT_MS = 15 * 60_000;
const RUN_LIMIT_MS = Number(process.env.TABFLEET_TEST_RUN_LIMIT_MS ?? 75 * 60_000);
const runner = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', `--test-timeout=${TEST_TIMEOUT_MS}`, '--test-force-exit', ...files], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, TABFLEET_BROWSER_WS: browser.wsEndpoint() },
  // Its own process group, so the watchdog can stop the per-file test processes with it.
  detached: true,
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.kill(-runner.pid, sig));
const watchdog = setTimeout(() => {
  console.error(`[test] the run passed ${RUN_LIMIT_MS / 60_000} minutes: stopping it (a test or hook is hanging)`);
  process.kill(-runner.pid, 'SIGKILL');
}, RUN_LIMIT_MS);
const started = Date.now();
const code = await new Promise((resolve) => runner.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
clearTimeout(watchdog);
console.log(`[test] ${files.length} test files in ${((Date.now() - started) / 60_000).toFixed(1)} min, exit code ${code}`);
await browser.close();
process.exit(code);
