// A throwaway redis-server on a free loopback port (no persistence), for tests of the Redis store
// and of several server nodes. Debian's redis-server; scripts/setup.mjs installs it.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';

/** A loopback TCP port nothing listens on right now. */
export async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const port = (probe.address() as { port: number }).port;
  await new Promise((r) => probe.close(r));
  return port;
}

/** `args`: more redis-server options, e.g. ['--proto-max-bulk-len', '1mb']. */
export async function startRedisServer(args: string[] = []): Promise<{ url: string; stop(): void }> {
  const port = await freePort();
  const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    redis.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('Ready to accept connections')) resolve();
    });
    redis.once('error', reject);
    redis.once('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${out}`)));
  });
  return { url: `redis://127.0.0.1:${port}`, stop: () => void redis.kill() };
}
