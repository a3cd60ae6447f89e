// `npm start -- --turn local` (scripts/start.ts with no volunteer tabs): it starts Debian's coturn on
// 127.0.0.1, the server hands a volunteer STUN and TURN on it with that volunteer's own credentials,
// coturn allocates a relay for them and refuses forged ones (401), no credential is printed, and
// Ctrl-C (SIGINT) stops coturn with the server. A --turn value other than 'local' is refused first.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { RingOracle, SimVolunteer, turnAllocate, waitFor } from '@tabfleet/server/testing';

const repo = join(import.meta.dirname, '..');

test('--turn with anything but local is refused with exit 2 before anything starts', { timeout: 60_000 }, async () => {
  const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = execFile(process.execPath, ['--import', 'tsx', 'scripts/start.ts', '--turn', 'turn:127.0.0.1:3478'], { cwd: repo }, (_e, _o, stderr) => resolve({ code: child.exitCode, stderr }));
  });
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /^--turn turn:127\.0\.0\.1:3478: want 'local' \(a coturn on this machine\)/);
});

test('npm start -- --turn local: a local coturn relays with the credentials the server issues, and stops on Ctrl-C', { timeout: 5 * 60_000 }, async () => {
  const data = mkdtempSync(join(tmpdir(), 'tabfleet-start-turn-'));
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts', '--port', '0', '--workers', '0', '--turn', 'local', '--data', data], {
    cwd: repo, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  let sim: SimVolunteer | null = null;
  try {
    await waitFor('the sign-in link', () => /dashboard sign-in: +http/.test(out) || child.exitCode !== null, 4 * 60_000, 100);
    const [, url] = /dashboard sign-in: +(http:\/\/127\.0\.0\.1:\d+)\//.exec(out) ?? assert.fail(`no sign-in link:\n${out}`);
    const [, port, pid] = /\[coturn\] STUN and TURN on 127\.0\.0\.1:(\d+) \(pid (\d+)\)/.exec(out) ?? assert.fail(`coturn not started:\n${out}`);
    assert.match(out, new RegExp(`ICE servers for volunteers' peer links: stun:127\\.0\\.0\\.1:${port}, turn:127\\.0\\.0\\.1:${port}\\?transport=udp`));

    sim = new SimVolunteer({ url, oracle: new RingOracle() });
    await sim.connected();
    assert.equal((await sim.request()).ok, true);
    const turn = sim.assignment?.iceServers?.find((s) => s.urls.includes(`turn:127.0.0.1:${port}?transport=udp`));
    assert.ok(turn?.username && turn.credential, JSON.stringify(sim.assignment?.iceServers));
    assert.deepEqual(await turnAllocate(Number(port), turn.username, turn.credential), { code: 0, relayed: true });
    assert.equal((await turnAllocate(Number(port), turn.username, 'forged-credential')).code, 401);
    sim.close();

    child.kill('SIGINT');
    assert.equal(await exited, 0, out);
    assert.throws(() => process.kill(Number(pid), 0), (e: NodeJS.ErrnoException) => e.code === 'ESRCH', 'coturn has stopped with the rest');
    assert.ok(!out.includes(turn.credential), 'no credential printed');
  } finally {
    sim?.close();
    // SIGTERM, not SIGKILL: start.ts then stops its coturn too, also while it is still starting.
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(data, { recursive: true, force: true });
  }
});
