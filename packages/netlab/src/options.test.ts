// Bad input gets a clear error and changes nothing; a machine without root fails with a message that
// says so rather than with a command's exit code.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { NetLab, type HomeOptions } from './index';

let lab: NetLab;

before(async () => {
  lab = await NetLab.create();
  await lab.home('h1', { nat: 'eim' });
});

after(() => lab?.close());

const bad: Array<[string, string, HomeOptions, RegExp]> = [
  ['an unknown NAT kind', 'h2', { nat: 'full-cone' as 'eim' }, /nat must be 'eim' or 'symmetric'/],
  ['a negative uplink', 'h2', { nat: 'eim', uplinkMbit: -1 }, /uplinkMbit must be a number of Mbit\/s/],
  ['a downlink that is not a number', 'h2', { nat: 'eim', downlinkMbit: '10' as unknown as number }, /downlinkMbit must be/],
  ['blockUdp that is not a boolean', 'h2', { nat: 'eim', blockUdp: 'yes' as unknown as boolean }, /blockUdp must be a boolean/],
  ['a name with capitals and symbols', 'Home!', { nat: 'eim' }, /name "Home!": 1–12 lowercase letters or digits/],
  ['a name taken already', 'h1', { nat: 'eim' }, /home h1 exists already/],
];

for (const [what, name, options, message] of bad) {
  test(`a home with ${what} is refused and nothing is made`, async () => {
    const before = await lab.namespaces();
    await assert.rejects(lab.home(name, options), message);
    assert.deepEqual(await lab.namespaces(), before);
    assert.equal(lab.homes.length, 1);
  });
}

test('a host name taken already in the home is refused', async () => {
  const home = lab.homes[0];
  await home.host('tab1');
  await assert.rejects(home.host('tab1'), /host in home h1 tab1 exists already/);
  assert.equal(home.hosts.length, 1);
});

test('exec and spawn refuse namespaces that are not the lab\'s', async () => {
  await assert.rejects(lab.exec('default', ['true']), /not a namespace of lab/);
  assert.throws(() => lab.spawn('other-ns', ['true']), /not a namespace of lab/);
});

test('a bad prefix is refused before anything is made', async () => {
  await assert.rejects(NetLab.create({ prefix: 'Bad-Prefix' }), /netlab prefix "Bad-Prefix"/);
});

test('without root the lab fails with a message that says it needs root', async () => {
  const entry = fileURLToPath(new URL('./index.ts', import.meta.url));
  const script = `import(${JSON.stringify(entry)}).then((m) => m.NetLab.create()).then(() => process.exit(0), (e) => { console.error(e.message); process.exit(3); });`;
  const child = spawn(process.execPath, ['--import', 'tsx', '-e', script], { uid: 65534, gid: 65534, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const code = await new Promise((resolve) => child.once('exit', resolve));
  assert.equal(code, 3, out);
  assert.match(out, /netlab needs root/);
});
