// `server/src/main.ts` with STUN and TURN options: bad URLs, a TURN server without the shared secret
// and a bad lifetime stop the start with exit 2 and a clear message; a good set starts, and the log
// names the servers but never the secret (read from $TABFLEET_TURN_SECRET only).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { startServerProcess } from './server-process';

const repo = join(import.meta.dirname, '../..');
const SECRET = 'cli-turn-secret-0123456789abcdef';

function main(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const argv = ['--import', 'tsx', 'server/src/main.ts', '--port', '0', ...args];
    const child = execFile(process.execPath, argv, { cwd: repo, env: { ...process.env, ...env } }, (_e, _out, stderr) => resolve({ code: child.exitCode, stderr }));
  });
}

test('bad ICE options stop the start with exit 2 and say what is wrong, never the secret', { timeout: 120_000 }, async () => {
  const withSecret = { TABFLEET_TURN_SECRET: SECRET };
  const cases: [string[], Record<string, string>, RegExp][] = [
    [['--stun', 'stun.example.org:3478'], {}, /^bad ICE options: --stun "stun\.example\.org:3478": want stun:host\[:port\]/],
    [['--turn', 'turn:turn.example.org:3478?transport=sctp'], withSecret, /^bad ICE options: --turn "turn:turn\.example\.org:3478\?transport=sctp": want turn:host\[:port\]/],
    [['--turn', 'turn:turn.example.org:3478'], { TABFLEET_TURN_SECRET: '' }, /^bad ICE options: --turn needs the TURN shared secret in \$TABFLEET_TURN_SECRET/],
    [['--turn', 'turn:turn.example.org', '--turn-ttl', '10'], withSecret, /^bad ICE options: --turn-ttl 10: want whole seconds, at least 60/],
    [['--turn', 'turn:turn.example.org', '--turn-ttl', '1h'], withSecret, /^bad --turn-ttl 1h: want whole seconds/],
  ];
  const results = await Promise.all(cases.map(([args, env]) => main(args, env)));
  results.forEach((r, i) => {
    assert.equal(r.code, 2, `${cases[i][0].join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, cases[i][2]);
    assert.ok(!r.stderr.includes(SECRET));
  });
});

test('a server with STUN and TURN servers starts and logs them without the secret', { timeout: 60_000 }, async () => {
  const ice = ['--stun', 'stun:127.0.0.1:3478', '--turn', 'turn:127.0.0.1:3478?transport=udp', '--turn', 'turns:127.0.0.1:5349?transport=tcp'];
  const server = await startServerProcess(ice, { TABFLEET_TURN_SECRET: SECRET });
  try {
    const logged = /ICE servers for volunteers' peer links: stun:127\.0\.0\.1:3478, turn:127\.0\.0\.1:3478\?transport=udp \(credentials valid 3600 s\), turns:127\.0\.0\.1:5349\?transport=tcp/;
    assert.match(server.output(), logged);
    assert.ok(!server.output().includes(SECRET));
  } finally {
    await server.stop();
  }
});
