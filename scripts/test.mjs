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
// Two runners side by side, one file at a time each: the end-to-end tests and benchmarks (the shared
// browser, the Chromium pages, bench children: most of the suite's time) and the Node-only unit and
// server tests beside them, which would otherwise add their minutes at the end. The second's output is
// held and printed as one block when it ends, so neither TAP stream is cut into the other.
const inBrowserGroup = (f) => f.startsWith('e2e/') || f.startsWith('bench/');
const groups = [
  { name: 'e2e and bench', files: files.filter(inBrowserGroup), streamed: true },
  { name: 'packages, server, apps, scripts', files: files.filter((f) => !inBrowserGroup(f)), streamed: false },
].filter((g) => g.files.length);

function startRunner(group) {
  const runner = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', `--test-timeout=${TEST_TIMEOUT_MS}`, '--test-force-exit', ...group.files], {
    cwd: root,
    stdio: ['ignore', group.streamed ? 'inherit' : 'pipe', group.streamed ? 'inherit' : 'pipe'],
    env: { ...process.env, TABFLEET_BROWSER_WS: browser.wsEndpoint() },
    // Its own process group, so the watchdog can stop the per-file test processes with it.
    detached: true,
  });
  const held = [];
  if (!group.streamed) for (const stream of [runner.stdout, runner.stderr]) stream.on('data', (chunk) => held.push(chunk));
  const printHeld = () => {
    if (group.streamed || !held.length) return;
    process.stdout.write(`\n[test] ---- ${group.name} (${group.files.length} files) ----\n`);
    process.stdout.write(Buffer.concat(held.splice(0)));
    process.stdout.write(`[test] ---- end of ${group.name} ----\n`);
  };
  const started = Date.now();
  const done = new Promise((resolve) => runner.on('exit', (c, signal) => {
    printHeld();
    const code = c ?? (signal ? 1 : 0);
    console.log(`[test] ${group.name}: ${group.files.length} test files in ${((Date.now() - started) / 60_000).toFixed(1)} min, exit code ${code}`);
    resolve(code);
  }));
  return { runner, done, printHeld };
}

const runners = groups.map(startRunner);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => runners.forEach((r) => process.kill(-r.runner.pid, sig)));
const watchdog = setTimeout(() => {
  console.error(`[test] the run passed ${RUN_LIMIT_MS / 60_000} minutes: stopping it (a test or hook is hanging)`);
  for (const r of runners) {
    r.printHeld();
    process.kill(-r.runner.pid, 'SIGKILL');
  }
}, RUN_LIMIT_MS);
const started = Date.now();
const codes = await Promise.all(runners.map((r) => r.done));
clearTimeout(watchdog);
const code = codes.find((c) => c !== 0) ?? 0;
console.log(`[test] ${files.length} test files in ${((Date.now() - started) / 60_000).toFixed(1)} min, exit code ${code}`);
await browser.close();
process.exit(code);
