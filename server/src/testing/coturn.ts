// A throwaway coturn TURN server, checking credentials in its REST-API mode (`use-auth-secret`) with
// the given shared secret, for tests of the TURN credentials the server issues. Debian's coturn
// (`turnserver`); scripts/setup.mjs installs it. Its log is kept in `log()`.
// By default it listens on a free loopback port here; a network-lab test passes `listenIp` (a public
// host's address) and `spawn` (the lab's, to start it inside that namespace). It always listens on
// UDP and TCP on one port (`turn:…?transport=udp|tcp`), and on TLS (`turns:`) when given `tls`.
import { spawn as spawnHere, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './redis-server';

export const TURNSERVER = '/usr/bin/turnserver';
/** netlab's home LAN addresses (packages/netlab/src/addresses.ts), never reachable from a public host: a lab's `deniedPeerRanges`. */
export const LAB_HOME_LANS = '192.0.2.0-192.0.2.255';

export interface CoturnOptions {
  /** The address it listens on (default 127.0.0.1). */
  listenIp?: string;
  /** The address its relayed candidates use (default listenIp). */
  relayIp?: string;
  /** The UDP and TCP port (default a free one). */
  port?: number;
  /** Certificate and key (PEM files) for TURN over TLS on `tls.port` (default port + 1). */
  tls?: { cert: string; key: string; port?: number };
  /**
   * Peer address ranges (`a.b.c.d-e.f.g.h`) it refuses to relay to, as operators deny private ranges: a
   * peer that cannot be reached from it (another network's LAN address) is refused a permission (403)
   * instead of being sent to, and a send that fails (ENETUNREACH) closes the whole allocation: in the
   * lab, a UDP-blocked tab's link over a TCP or TLS allocation opened, then died within seconds.
   * A lab passes LAB_HOME_LANS. Default: none.
   */
  deniedPeerRanges?: string[];
  /**
   * The longest allocation lifetime it grants, in seconds (coturn's default 3600; a client that asks
   * for none gets 600). Chromium refreshes an allocation at half a lifetime under 2 minutes, and one
   * whose client vanished without a zero-lifetime Refresh closes when it lapses: a lab that waits for
   * every allocation of a closed page to close sets it short. Default: coturn's.
   */
  maxAllocateLifetimeS?: number;
  /** Starts turnserver with these arguments, e.g. inside a lab namespace (default: here). */
  spawn?: (argv: string[]) => ChildProcess;
}

export interface Coturn {
  /** `turn:IP:PORT?transport=udp`. */
  url: string;
  /** `stun:IP:PORT`: coturn answers STUN binding requests on the same port. */
  stunUrl: string;
  /** `turn:IP:PORT?transport=tcp`. */
  tcpUrl: string;
  /** `turns:IP:TLSPORT?transport=tcp`, when started with `tls`. */
  tlsUrl?: string;
  port: number;
  realm: string;
  /** Everything it logged so far. */
  log(): string;
  stop(): void;
}

export async function startCoturn(secret: string, opts: CoturnOptions = {}): Promise<Coturn> {
  if (!existsSync(TURNSERVER)) throw new Error(`${TURNSERVER} is missing: install Debian's coturn package (npm run setup, as root, does: apt-get install coturn)`);
  const ip = opts.listenIp ?? '127.0.0.1';
  const port = opts.port ?? await freePort();
  const tlsPort = opts.tls ? opts.tls.port ?? port + 1 : undefined;
  const dir = mkdtempSync(join(tmpdir(), 'tabfleet-coturn-'));
  const realm = 'tabfleet.test';
  const tlsArgs = opts.tls ? [`--tls-listening-port=${tlsPort}`, `--cert=${opts.tls.cert}`, `--pkey=${opts.tls.key}`, '--no-dtls'] : ['--no-tls', '--no-dtls'];
  const argv = [
    TURNSERVER, '-n', `--listening-ip=${ip}`, `--relay-ip=${opts.relayIp ?? ip}`, `--listening-port=${port}`, '--use-auth-secret', `--static-auth-secret=${secret}`,
    `--realm=${realm}`, '--allow-loopback-peers', '--no-cli', ...tlsArgs,
    ...(opts.deniedPeerRanges ?? []).map((range) => `--denied-peer-ip=${range}`),
    ...(opts.maxAllocateLifetimeS ? [`--max-allocate-lifetime=${opts.maxAllocateLifetimeS}`] : []), '--log-file=stdout', '--simple-log', '--verbose',
    `--userdb=${join(dir, 'turndb')}`, `--pidfile=${join(dir, 'pid')}`,
  ];
  const turn = opts.spawn ? opts.spawn(argv) : spawnHere(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  // Also when the test process ends without stopping it (a failed assertion, --test-force-exit).
  const kill = () => turn.kill();
  process.once('exit', kill);
  let out = '';
  const ready = [`UDP listener opened on: ${ip}:${port}`, ...(opts.tls ? [`TLS/TCP listener opened on : ${ip}:${tlsPort}`] : [])];
  await new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d;
      if (ready.every((line) => out.includes(line))) resolve();
    };
    turn.stdout!.on('data', onData);
    turn.stderr!.on('data', onData);
    turn.once('error', reject);
    turn.once('exit', (code) => reject(new Error(`turnserver exited with ${code}: ${out.slice(-2000)}`)));
  });
  return {
    url: `turn:${ip}:${port}?transport=udp`, tcpUrl: `turn:${ip}:${port}?transport=tcp`, stunUrl: `stun:${ip}:${port}`, port, realm,
    ...(opts.tls ? { tlsUrl: `turns:${ip}:${tlsPort}?transport=tcp` } : {}),
    log: () => out,
    stop: () => {
      process.off('exit', kill);
      turn.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
