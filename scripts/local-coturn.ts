// `npm start -- --turn local`: Debian's coturn (installed by scripts/setup.mjs) on 127.0.0.1 for this
// machine's volunteers, STUN and TURN on one free port, checking the server's per-volunteer
// credentials (REST-API mode, `use-auth-secret`) with a shared secret made for this run. The secret
// lives in a 0600 config file in a private temporary directory, never on a command line (which `ps`
// shows every user), and goes to the server in memory; `stop()` ends coturn and removes the file.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const TURNSERVER = '/usr/bin/turnserver';

export interface LocalCoturn {
  /** `stun:127.0.0.1:PORT` and `turn:127.0.0.1:PORT?transport=udp`, for the server's ICE options. */
  stun: string;
  turn: string;
  port: number;
  /** The static-auth-secret, for the server's `turnSecret` only. */
  secret: string;
  pid: number;
  /** What coturn logged so far (kept for an error message). */
  log(): string;
  stop(): Promise<void>;
}

/** A port free for both TCP and UDP on 127.0.0.1 (coturn listens on both). */
async function freeTcpUdpPort(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const tcp = createServer();
    await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', r));
    const port = (tcp.address() as { port: number }).port;
    const udp = createSocket('udp4');
    const udpFree = await new Promise<boolean>((r) => {
      udp.once('error', () => r(false));
      udp.bind(port, '127.0.0.1', () => r(true));
    });
    udp.close();
    await new Promise((r) => tcp.close(r));
    if (udpFree) return port;
  }
  throw new Error('no port free for both TCP and UDP on 127.0.0.1');
}

export async function startLocalCoturn(log: (line: string) => void = () => {}): Promise<LocalCoturn> {
  if (!existsSync(TURNSERVER)) throw new Error(`${TURNSERVER} is missing: --turn local needs Debian's coturn (npm run setup, as root, installs it)`);
  const port = await freeTcpUdpPort();
  const secret = randomBytes(24).toString('hex');
  const dir = mkdtempSync(join(tmpdir(), 'tabfleet-local-coturn-'));
  const config = join(dir, 'turnserver.conf');
  // Loopback only: tabs on this machine reach it, nothing else can. Relayed peers are loopback too.
  // verbose: coturn says its UDP listener is open (what this waits for) only then.
  writeFileSync(config, [
    'listening-ip=127.0.0.1', 'relay-ip=127.0.0.1', `listening-port=${port}`, 'use-auth-secret', `static-auth-secret=${secret}`, 'realm=tabfleet.local',
    'allow-loopback-peers', 'no-cli', 'no-tls', 'no-dtls', 'fingerprint', 'log-file=stdout', 'simple-log', 'verbose', `userdb=${join(dir, 'turndb')}`, `pidfile=${join(dir, 'pid')}`, '',
  ].join('\n'), { mode: 0o600 });
  const child = spawn(TURNSERVER, ['-c', config], { stdio: ['ignore', 'pipe', 'pipe'] });
  // Also when the script ends without stop() (an exception): coturn is not left running.
  const kill = () => {
    child.kill();
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', kill);
  let out = '';
  const ready = `UDP listener opened on: 127.0.0.1:${port}`;
  try {
    await new Promise<void>((resolve, reject) => {
      const onData = (d: Buffer) => {
        out = (out + d).slice(-20_000);
        if (out.includes(ready)) resolve();
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`coturn exited with ${code} before it listened:\n${out.slice(-2000)}`)));
    });
  } catch (e) {
    process.off('exit', kill);
    child.kill();
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  let stopping = false;
  child.once('exit', (code, signal) => !stopping && log(`coturn exited (${code ?? signal}); volunteers' TURN relays are gone:\n${out.slice(-2000)}`));
  return {
    stun: `stun:127.0.0.1:${port}`, turn: `turn:127.0.0.1:${port}?transport=udp`, port, secret, pid: child.pid!,
    log: () => out,
    async stop() {
      stopping = true;
      process.off('exit', kill);
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
