// The server node of the soak, forked by bench/soak.ts (and killed with SIGKILL in the middle of each
// run; node-kill.test.ts forks two on one Redis): `startServer()` as server/src/main.ts runs it, on 127.0.0.1 at the given port and data
// directory, with short round timings (main.ts has no timing flags) and no per-address limits (every
// simulated volunteer connects from 127.0.0.1). An IPC channel reports this process's memory after a
// forced GC (`--expose-gc`). It exits when its parent goes away.
import { startServer } from '@tabfleet/server';
import type { FromSoakServer, SoakServerArgs, ToSoakServer } from './messages';

const args = JSON.parse(process.argv[2] ?? 'null') as SoakServerArgs | null;
if (!args || !process.send) {
  console.error('usage: forked by bench/soak.ts with a JSON argument');
  process.exit(2);
}
const send = (m: FromSoakServer) => process.send?.(m);
process.on('disconnect', () => process.exit(0));

try {
  const server = await startServer({
    port: args.port, host: '127.0.0.1', dataDir: args.dataDir, token: args.token, timing: args.timing, redisUrl: args.redisUrl, nodeId: args.nodeId,
    addressLimits: { connections: 100_000, jobShare: 1 },
    networkRules: false,
    // Joiners fetch a checkpoint each, all from one address.
    httpRateLimit: { perSecond: 100_000, burst: 100_000 },
  });
  process.on('message', (m: ToSoakServer) => {
    if (m.type !== 'stats') return;
    const gc = (globalThis as { gc?: () => void }).gc;
    if (gc) {
      gc();
      gc();
    }
    const mem = process.memoryUsage();
    send({ type: 'stats', rssBytes: mem.rss, heapUsedBytes: mem.heapUsed, gc: !!gc });
  });
  console.log(`[server] ready ${server.url}`);
  send({ type: 'ready', url: server.url, pid: process.pid });
} catch (e) {
  send({ type: 'fatal', message: (e as Error).stack ?? String(e) });
  process.exit(1);
}
