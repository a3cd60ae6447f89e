// A throwaway coturn TURN server on a free loopback port, checking credentials in its REST-API mode
// (`use-auth-secret`) with the given shared secret, for tests of the TURN credentials the server
// issues. Debian's coturn (`turnserver`); scripts/setup.mjs installs it. Its log is kept in `log()`.
// `options` put it elsewhere, e.g. on a network lab's public host: its address and a spawner that
// starts the process inside that namespace (NetLab.spawn).
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './redis-server';

export const TURNSERVER = '/usr/bin/turnserver';

export interface Coturn {
  /** `turn:IP:PORT?transport=udp` (IP: 127.0.0.1 unless `listenIp` said otherwise). */
  url: string;
  port: number;
  realm: string;
  /** Everything it logged so far. */
  log(): string;
  stop(): void;
}

export interface CoturnOptions {
  /** Address it listens on for clients (UDP and TCP) and relays from (default 127.0.0.1). */
  listenIp?: string;
  /** Listening port (default: a free loopback port). */
  port?: number;
  /** Starts the process (default: node's spawn here), e.g. `(argv) => lab.spawn(host, argv)`. */
  spawn?: (argv: string[]) => ChildProcess;
  /**
   * Peer address ranges (`a.b.c.d-w.x.y.z`) it refuses to relay to, as public deployments deny private
   * ranges. In a lab the homes' LAN addresses must be here: a send to them fails with "Network is
   * unreachable" (the public host has no route there), and coturn then closes the whole allocation.
   */
  deniedPeerIps?: string[];
}

export async function startCoturn(secret: string, options: CoturnOptions = {}): Promise<Coturn> {
  if (!existsSync(TURNSERVER)) throw new Error(`${TURNSERVER} is missing: install Debian's coturn package (npm run setup, as root, does: apt-get install coturn)`);
  const ip = options.listenIp ?? '127.0.0.1';
  const port = options.port ?? await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tabfleet-coturn-'));
  const realm = 'tabfleet.test';
  const start = options.spawn ?? ((argv: string[]) => spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] }));
  const turn = start([TURNSERVER,
    '-n', `--listening-ip=${ip}`, `--relay-ip=${ip}`, `--listening-port=${port}`, '--use-auth-secret', `--static-auth-secret=${secret}`, `--realm=${realm}`,
    ...(options.deniedPeerIps ?? []).map((r) => `--denied-peer-ip=${r}`),
    '--allow-loopback-peers', '--no-cli', '--no-tls', '--no-dtls', '--log-file=stdout', '--simple-log', '--verbose', `--userdb=${join(dir, 'turndb')}`, `--pidfile=${join(dir, 'pid')}`,
  ]);
  // Also when the test process ends without stopping it (a failed assertion, --test-force-exit).
  const kill = () => turn.kill();
  process.once('exit', kill);
  let out = '';
  const ready = `UDP listener opened on: ${ip}:${port}`;
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
    url: `turn:${ip}:${port}?transport=udp`, port, realm,
    log: () => out,
    stop: () => {
      process.off('exit', kill);
      turn.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
