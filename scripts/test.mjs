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
const runner = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', ...files], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, TABFLEET_BROWSER_WS: browser.wsEndpoint() },
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => runner.kill(sig));
const code = await new Promise((resolve) => runner.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
await browser.close();
process.exit(code);
