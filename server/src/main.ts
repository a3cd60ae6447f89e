// `node --import tsx server/src/main.ts [--port N] [--host H] [--data DIR] [--redis URL]`: runs one
// server node until SIGINT/SIGTERM. Environment: PORT, TABFLEET_DATA, REDIS_URL, TABFLEET_TOKEN,
// TABFLEET_NAME, TABFLEET_OPERATOR.
import { parseArgs } from 'node:util';
import { startServer } from './app';

const USAGE = `usage: server/src/main.ts [--port N] [--host H] [--data DIR] [--redis URL] [--node ID]
  --port N      listen port (default $PORT or 8080; 0 picks a free one)
  --host H      listen address (default 127.0.0.1)
  --data DIR    SQLite file and checkpoints (default $TABFLEET_DATA or ./data)
  --redis URL   share state with other nodes through Redis (default $REDIS_URL)
  --node ID     this node's name in a cluster (default random)
  --name TEXT   what volunteers see this server called (default $TABFLEET_NAME or host:port)
  --operator T  who runs it, shown to volunteers (default $TABFLEET_OPERATOR, else not shown)
  --address-connections N   volunteer connections one address may hold (default 32)
  --address-job-share F     share (0-1] of a job's slots one address may hold (default 0.5)
The researcher token comes from $TABFLEET_TOKEN, or is generated at the first start and printed.`;

const { values } = parseArgs({
  options: {
    port: { type: 'string' }, host: { type: 'string' }, data: { type: 'string' }, redis: { type: 'string' }, node: { type: 'string' }, name: { type: 'string' }, operator: { type: 'string' },
    'address-connections': { type: 'string' }, 'address-job-share': { type: 'string' }, help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const port = Number(values.port ?? process.env.PORT ?? 8080);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`bad --port ${values.port}\n${USAGE}`);
  process.exit(2);
}

const connections = values['address-connections'] === undefined ? undefined : Number(values['address-connections']);
const jobShare = values['address-job-share'] === undefined ? undefined : Number(values['address-job-share']);
if ((connections !== undefined && !(Number.isInteger(connections) && connections >= 1)) || (jobShare !== undefined && !(jobShare > 0 && jobShare <= 1))) {
  console.error(`bad --address-connections or --address-job-share\n${USAGE}`);
  process.exit(2);
}

const server = await startServer({
  addressLimits: { connections, jobShare },
  port,
  host: values.host,
  dataDir: values.data ?? process.env.TABFLEET_DATA,
  redisUrl: values.redis ?? process.env.REDIS_URL,
  nodeId: values.node,
  name: values.name ?? process.env.TABFLEET_NAME,
  operator: values.operator ?? process.env.TABFLEET_OPERATOR,
});
console.log(`[server] dashboard: ${server.url}/apps/dashboard/?token=${server.secrets.token}`);
console.log(`[server] volunteer: ${server.url}/apps/volunteer/`);
if (server.secrets.generated) console.log(`[server] researcher token generated and stored: ${server.secrets.token}`);
// A line tests and scripts wait for.
console.log(`[server] ready ${server.url}`);

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) process.exit(1);
    stopping = true;
    console.log(`[server] ${signal}: closing`);
    server.close().then(() => process.exit(0), (e) => {
      console.error(e);
      process.exit(1);
    });
  });
}
