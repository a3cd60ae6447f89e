// Nothing the lab made outlives it: close() deletes every namespace (and ends what ran in them), a test
// that throws still closes it, a process killed outright is cleaned after by its reaper, and a new lab
// sweeps namespaces of labs whose process is gone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { NetLab } from './index';
import { listNamespaces, runCommand } from './command';
import { waitFor } from './testing/index';

const CHILD = fileURLToPath(new URL('./testing/lab-child.ts', import.meta.url));
const ofLab = async (id: string) => (await listNamespaces()).filter((ns) => ns.startsWith(`${id}-`));

/** Starts lab-child.ts; resolves with the child and its lab's id once the lab is built. */
function startChild(mode: string, prefix: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, mode, prefix], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const id = (async () => {
    await waitFor(() => /"id":"[^"]+"/.test(out) || child.exitCode !== null);
    const m = /"id":"([^"]+)"/.exec(out);
    if (!m) throw new Error(`lab-child ${mode} exited ${child.exitCode}: ${out}`);
    return m[1];
  })();
  return { child, id, exited, output: () => out };
}

test('close() deletes every namespace of the lab and ends the processes in them', async () => {
  const lab = await NetLab.create();
  await lab.publicHost('server');
  const home = await lab.home('h1', { nat: 'eim', blockUdp: true, uplinkMbit: 10, downlinkMbit: 10 });
  const tab = await home.host('tab1');
  const sleeper = lab.spawn(tab, ['sleep', '600']);
  const exited = new Promise((resolve) => sleeper.once('exit', resolve));
  assert.deepEqual((await lab.namespaces()).sort(), [lab.internet, `${lab.id}-pub-server`, home.ns, tab.ns].sort());
  await lab.close();
  await exited;
  assert.deepEqual(await ofLab(lab.id), []);
  assert.throws(() => lab.spawn(tab, ['true']), /closed/);
});

test('a test that throws inside still leaves no namespace behind', async () => {
  const run = startChild('throw', 'tflthrow');
  const id = await run.id;
  assert.notEqual(await run.exited, 0, 'the test inside should have failed');
  assert.match(run.output(), /thrown inside the test/);
  assert.deepEqual(await ofLab(id), []);
});

test('a process killed with SIGKILL leaves nothing: its reaper deletes the namespaces', async () => {
  const run = startChild('hold', 'tflkill');
  const id = await run.id;
  assert.equal((await ofLab(id)).length, 4);
  run.child.kill('SIGKILL');
  await run.exited;
  await waitFor(async () => (await ofLab(id)).length === 0);
  // The sleep that ran in the host namespace went with it.
  const { stdout } = await runCommand(['pgrep', '-f', 'sleep 600'], { allowFailure: true });
  for (const pid of stdout.split('\n').filter(Boolean)) {
    const { stdout: ns } = await runCommand(['ip', 'netns', 'identify', pid], { allowFailure: true });
    assert.ok(!ns.startsWith(`${id}-`), `process ${pid} still runs in ${ns}`);
  }
});

test("a new lab sweeps namespaces of labs whose process is gone, and leaves live labs' alone", async () => {
  const gone = spawn('true');
  await new Promise((resolve) => gone.once('exit', resolve));
  const stale = `tflsweep-${gone.pid}-1-inet`;
  await runCommand(['ip', 'netns', 'add', stale]);
  const live = await NetLab.create({ prefix: 'tflsweep' });
  const other = await NetLab.create({ prefix: 'tflsweep' });
  try {
    assert.ok(!(await listNamespaces()).includes(stale), `${stale} was not swept`);
    assert.deepEqual(await live.namespaces(), [live.internet], 'a live lab was swept by another');
  } finally {
    await other.close();
    await live.close();
    await runCommand(['ip', 'netns', 'del', stale], { allowFailure: true });
  }
});
