// `npm test`: type-check, then every *.test.ts through Node's test runner. Browser tests inside it
// share a headless Chromium per lane (below), launched here and reached through TABFLEET_BROWSER_WS.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, dirname, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { canMeasureProcessCpu, treeCpuSeconds } from './process-cpu.mjs';

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
console.log(`[test] running ${files.length} test files`);
// Asynchronous on purpose: the shared browser's WebSocket is served from this process's event loop,
// so a blocking spawnSync would hang every browser test.
// A test that hangs fails after TEST_TIMEOUT_MS (tests that need longer say so); a file whose tests
// are done exits even if something it started still holds a handle; and the whole run is stopped
// at RUN_LIMIT_MS, so a hang is a red run with a message rather than a CI timeout.
// It bounds each file as a whole too, so it is the longest any test declares (untrusted-groups-tabs: 30
// min; at 15 it was cut off at 900 s on a busy machine although it asked for more).
const TEST_TIMEOUT_MS = 30 * 60_000;
const RUN_LIMIT_MS = Number(process.env.TABFLEET_TEST_RUN_LIMIT_MS ?? 75 * 60_000);
// Two lanes, one test file at a time each, from two queues: the end-to-end tests and benchmarks (the
// shared browser, Chromium pages, bench children: most of the suite's time) and the Node-only unit and
// server tests. One lane takes the first queue; the other the second, then what is left of the first.
// Much of an end-to-end test's time is waiting (timers, links, a member kept silent for 30 s), so a
// second lane gains there as it did beside the Node-only tests (35.1 min one file at a time; 27.3 and
// 33.6 with the Node-only tests alone beside the others). Each file's output is held and printed as
// one block when it ends, so no two TAP streams are cut into each other.
const inBrowserGroup = (f) => f.startsWith('e2e/') || f.startsWith('bench/');
// Browser tests of many tabs fill both cores: they go first, beside the other lane's Node-only tests,
// not beside the tests that run six worker runtimes in one process. Alphabetical neighbours, eight tabs
// and untrusted-groups-rerun-in-node ran side by side: a runtime's handshake and another's heartbeat
// timed out, and a job below its minimum never synced (CI red; 2 of 3 runs beside it failed).
const MANY_TABS = ['e2e/untrusted-groups-tabs.test.ts', 'e2e/byzantine-tabs.test.ts'];
const firstIfManyTabs = (a, b) => Number(MANY_TABS.includes(b)) - Number(MANY_TABS.includes(a));
const queues = [files.filter(inBrowserGroup).sort(firstIfManyTabs), files.filter((f) => !inBrowserGroup(f))];
// One browser per lane: pages of two files in one browser share its GPU process, and with SwiftShader
// each file's WebGPU work then waited behind the other's (volunteer-tabs and distributed-training side by
// side took 171 s and 315 s in one browser, 139 s and 255 s with a browser each).
const lanes = [[queues[0]], [queues[1], queues[0]]];
const browsers = await Promise.all(lanes.map(() => launchSharedBrowser()));
const running = new Map();
const totals = { files: 0, pass: 0, fail: 0, failed: [] };
const count = (text, key) => [...text.matchAll(new RegExp(`^# ${key} (\\d+)$`, 'gm'))].reduce((n, m) => n + Number(m[1]), 0);

function printBlock(file, output, line) {
  process.stdout.write(`\n[test] ---- ${file} ----\n`);
  process.stdout.write(output);
  process.stdout.write(`[test] ${line}\n`);
}

// What each file costs the machine: the CPU seconds of its test process's tree and of its lane's
// browser while it ran (scripts/process-cpu.mjs), sampled every second (a process that exits between
// two samples loses at most its last second).
const cpuSeconds = new Map();
const browserPid = (browser) => browser.process().pid;
function sampleCpu() {
  const files = [...running.values()];
  const readings = treeCpuSeconds(files.map((r) => r.child.pid));
  files.forEach((r, i) => (r.childSeconds = Math.max(r.childSeconds, readings[i])));
}
const cpuSampler = canMeasureProcessCpu() ? setInterval(sampleCpu, 1000) : null;

function runFile(file, browser) {
  const child = spawn(process.execPath, ['--import', 'tsx', '--test', `--test-timeout=${TEST_TIMEOUT_MS}`, '--test-force-exit', file], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TABFLEET_BROWSER_WS: browser.wsEndpoint() },
    // Its own process group, so the watchdog can stop the per-file test process with it.
    detached: true,
  });
  const held = [];
  for (const stream of [child.stdout, child.stderr]) stream.on('data', (chunk) => held.push(chunk));
  const browserStart = cpuSampler ? treeCpuSeconds([browserPid(browser)])[0] : 0;
  running.set(file, { child, held, childSeconds: 0 });
  const started = Date.now();
  return new Promise((resolve) => child.on('exit', (c, signal) => {
    const r = running.get(file);
    if (cpuSampler) cpuSeconds.set(file, r.childSeconds + treeCpuSeconds([browserPid(browser)])[0] - browserStart);
    running.delete(file);
    const output = Buffer.concat(held).toString();
    const code = c ?? (signal ? 1 : 0);
    const pass = count(output, 'pass'), fail = count(output, 'fail');
    totals.files++;
    totals.pass += pass;
    totals.fail += fail;
    if (code !== 0 || fail > 0) totals.failed.push(file);
    const cpu = cpuSeconds.has(file) ? `, ${cpuSeconds.get(file).toFixed(0)} CPU s` : '';
    printBlock(file, output, `${file}: ${pass} passed, ${fail} failed in ${((Date.now() - started) / 1000).toFixed(0)} s${cpu}, exit code ${code} (${totals.files}/${files.length} files)`);
    resolve();
  }));
}

let stopped = false;
async function runLane(lane, i) {
  for (const queue of lane) while (queue.length && !stopped) await runFile(queue.shift(), browsers[i]);
}

for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => {
  stopped = true;
  running.forEach(({ child }) => process.kill(-child.pid, sig));
});
const watchdog = setTimeout(() => {
  console.error(`[test] the run passed ${RUN_LIMIT_MS / 60_000} minutes: stopping it (a test or hook is hanging); not run: ${queues.flat().join(', ') || 'none'}`);
  stopped = true;
  for (const { child } of running.values()) process.kill(-child.pid, 'SIGKILL');
}, RUN_LIMIT_MS);
const started = Date.now();
await Promise.all(lanes.map(runLane));
clearTimeout(watchdog);
clearInterval(cpuSampler);
const costliest = [...cpuSeconds].sort((a, b) => b[1] - a[1]).slice(0, 15);
const costRows = costliest.map(([f, s]) => `[test]   ${s.toFixed(0).padStart(5)}  ${f}`);
if (costliest.length) console.log(`\n[test] the costliest files, in CPU seconds (the file's processes and its lane's browser):\n${costRows.join('\n')}`);
const code = totals.failed.length ? 1 : 0;
const cpuTotal = [...cpuSeconds.values()].reduce((a, b) => a + b, 0);
if (cpuSampler) console.log(`[test] the files' CPU time in all: ${(cpuTotal / 60).toFixed(1)} min`);
console.log(`\n[test] ${totals.files} test files, ${totals.pass} tests passed, ${totals.fail} failed, in ${((Date.now() - started) / 60_000).toFixed(1)} min, exit code ${code}`);
if (totals.failed.length) console.log(`[test] failed: ${totals.failed.join(', ')}`);
await Promise.all(browsers.map((b) => b.close()));
process.exit(code);
