// A throwaway coturn TURN server checking credentials in its REST-API mode (`use-auth-secret`) with the
// given shared secret, for tests of the TURN credentials the server issues. By default on a free
// loopback port; the network lab passes its public host's address and a `spawn` that starts it inside
// that namespace. Debian's coturn (`turnserver`); scripts/setup.mjs installs it. Its log is kept in `log()`.
import { spawn as spawnChild, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './redis-server';

export const TURNSERVER = '/usr/bin/turnserver';

export interface Coturn {
  /** `turn:LISTEN_IP:PORT?transport=udp`. */
  url: string;
  /** `stun:LISTEN_IP:PORT`: coturn answers STUN binding requests on the same port. */
  stunUrl: string;
  port: number;
  realm: string;
  /** Everything it logged so far. */
  log(): string;
  stop(): void;
}

export interface CoturnOptions {
  /** The address it listens on (default 127.0.0.1). */
  listenIp?: string;
  /** The address its relayed transports use (default: listenIp). */
  relayIp?: string;
  /** Its port (default: a free loopback port; pass one when it listens elsewhere). */
  port?: number;
  /**
   * Peer address ranges (`a.b.c.d-e.f.g.h`) it refuses to relay to, as operators deny private ranges: a
   * peer that cannot be reached from it (another network's LAN address) is refused a permission (403)
   * instead of being sent to, and a send that fails (ENETUNREACH) closes the whole allocation.
   */
  deniedPeerRanges?: string[];
  /** Starts the process (default: here, with node's spawn); a lab passes `(argv) => lab.spawn(host, argv)`. */
  spawn?: (argv: string[]) => ChildProcess;
}

export async function startCoturn(secret: string, opts: CoturnOptions = {}): Promise<Coturn> {
  if (!existsSync(TURNSERVER)) throw new Error(`${TURNSERVER} is missing: install Debian's coturn package (npm run setup, as root, does: apt-get install coturn)`);
  const listenIp = opts.listenIp ?? '127.0.0.1';
  const relayIp = opts.relayIp ?? listenIp;
  const port = opts.port ?? await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tabfleet-coturn-'));
  const realm = 'tabfleet.test';
  const argv = [
    TURNSERVER, '-n', `--listening-ip=${listenIp}`, `--relay-ip=${relayIp}`, `--listening-port=${port}`, '--use-auth-secret', `--static-auth-secret=${secret}`, `--realm=${realm}`,
    '--allow-loopback-peers', '--no-cli', '--no-tls', '--no-dtls', '--log-file=stdout', '--simple-log', '--verbose', `--userdb=${join(dir, 'turndb')}`, `--pidfile=${join(dir, 'pid')}`,
    ...(opts.deniedPeerRanges ?? []).map((range) => `--denied-peer-ip=${range}`),
  ];
  const turn = opts.spawn ? opts.spawn(argv) : spawnChild(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  // Also when the test process ends without stopping it (a failed assertion, --test-force-exit).
  const kill = () => turn.kill();
  process.once('exit', kill);
  let out = '';
  const ready = `UDP listener opened on: ${listenIp}:${port}`;
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
    url: `turn:${listenIp}:${port}?transport=udp`, stunUrl: `stun:${listenIp}:${port}`, port, realm,
    log: () => out,
    stop: () => {
      process.off('exit', kill);
      turn.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
