// A throwaway coturn TURN server on a free loopback port, checking credentials in its REST-API mode
// (`use-auth-secret`) with the given shared secret, for tests of the TURN credentials the server
// issues. Debian's coturn (`turnserver`); scripts/setup.mjs installs it. Its log is kept in `log()`.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './redis-server';

export const TURNSERVER = '/usr/bin/turnserver';

export interface Coturn {
  /** `turn:127.0.0.1:PORT?transport=udp`. */
  url: string;
  port: number;
  realm: string;
  /** Everything it logged so far. */
  log(): string;
  stop(): void;
}

export async function startCoturn(secret: string): Promise<Coturn> {
  if (!existsSync(TURNSERVER)) throw new Error(`${TURNSERVER} is missing: install Debian's coturn package (npm run setup, as root, does: apt-get install coturn)`);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tabfleet-coturn-'));
  const realm = 'tabfleet.test';
  const turn = spawn(TURNSERVER, [
    '-n', '--listening-ip=127.0.0.1', '--relay-ip=127.0.0.1', `--listening-port=${port}`, '--use-auth-secret', `--static-auth-secret=${secret}`, `--realm=${realm}`,
    '--allow-loopback-peers', '--no-cli', '--no-tls', '--no-dtls', '--log-file=stdout', '--simple-log', '--verbose', `--userdb=${join(dir, 'turndb')}`, `--pidfile=${join(dir, 'pid')}`,
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  // Also when the test process ends without stopping it (a failed assertion, --test-force-exit).
  const kill = () => turn.kill();
  process.once('exit', kill);
  let out = '';
  const ready = `UDP listener opened on: 127.0.0.1:${port}`;
  await new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d;
      if (out.includes(ready)) resolve();
    };
    turn.stdout!.on('data', onData);
    turn.stderr!.on('data', onData);
    turn.once('error', reject);
    turn.once('exit', (code) => reject(new Error(`turnserver exited with ${code}: ${out.slice(-2000)}`)));
  });
  return {
    url: `turn:127.0.0.1:${port}?transport=udp`, port, realm,
    log: () => out,
    stop: () => {
      process.off('exit', kill);
      turn.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
