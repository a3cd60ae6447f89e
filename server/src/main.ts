// `node --import tsx server/src/main.ts [--port N] [--host H] [--data DIR] [--redis URL] [--public-url URL] [--tls-cert F --tls-key F]`: runs one
// server node until SIGINT/SIGTERM. Environment: PORT, TABFLEET_DATA, REDIS_URL, TABFLEET_TOKEN,
// TABFLEET_NAME, TABFLEET_OPERATOR, TABFLEET_TURN_SECRET.
import { parseArgs } from 'node:util';
import { startServer } from './app';
import { IceIssuer, type IceOptions } from './ice';
import { realClock } from './coordinator/types';
import { WeakTokenError } from './auth';
import { checkAllowedOrigin, trustedProxies } from './http/security';
import { readTlsFiles, type TlsFiles } from './http/tls';

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
  --max-active-jobs N       unfinished jobs at once, across the cluster (default 64)
  --max-model-mib N         largest model (f32 parameters) a job may have, and checkpoint upload (default 2048)
  --network-prefix V4,V6    prefix lengths that make one network (default 24,48): in untrusted jobs one
                network is never a majority of the members or two seats of a quorum; 'off' where every
                volunteer is this machine's
  --public-url U  the URL volunteers reach this server at (checkpoint and shard links start with it);
                without it, a server on --host 0.0.0.0 hands out paths relative to itself
  --allow-origin O  another origin (https://example.org) whose pages may use this server: open Socket.IO connections
                and embed the contribute widget (repeatable; '*': any; same origin always may)
  --allow-host H    another name requests may carry in their Host header (repeatable; '*': any). IP addresses,
                localhost, this machine's name and the --host and --public-url names always may; others
                are refused (421), so a page whose DNS name was pointed at this server cannot use it
  --stun URL    a STUN server volunteers' peer links use (stun:host[:port]; repeatable)
  --turn URL    a TURN server (turn:host[:port][?transport=udp|tcp], turns:…; repeatable), coturn with
                use-auth-secret: its static-auth-secret comes from $TABFLEET_TURN_SECRET; each volunteer
                gets its own credentials, renewed while it is a member
  --turn-ttl S  how long a volunteer's TURN credentials are valid, seconds (default 3600, at least 60)
  --tls-cert F  serve https:// (and wss://) with this PEM certificate chain, leaf first (with --tls-key)
  --tls-key F   the certificate's PEM private key, unencrypted (SIGHUP reads both files again)
  --trust-proxy A   a reverse proxy's address (as this server sees it) whose X-Forwarded-For names the
                client: per-address limits and networks then count volunteers, not the proxy (repeatable;
                none by default, the header is ignored)
The researcher token comes from $TABFLEET_TOKEN (at least 16 characters), or is generated at the
first start and kept in the data directory (mode 0600). The sign-in link is printed once per start;
the dashboard removes the token from the address bar and keeps it for the tab only.`;

const { values } = parseArgs({
  options: {
    port: { type: 'string' }, host: { type: 'string' }, data: { type: 'string' }, redis: { type: 'string' }, node: { type: 'string' }, name: { type: 'string' }, operator: { type: 'string' },
    'address-connections': { type: 'string' }, 'address-job-share': { type: 'string' }, 'network-prefix': { type: 'string' }, 'max-active-jobs': { type: 'string' },
    'max-model-mib': { type: 'string' },
    'public-url': { type: 'string' }, 'allow-origin': { type: 'string', multiple: true }, 'allow-host': { type: 'string', multiple: true },
    stun: { type: 'string', multiple: true }, turn: { type: 'string', multiple: true }, 'turn-ttl': { type: 'string' },
    'tls-cert': { type: 'string' }, 'tls-key': { type: 'string' }, 'trust-proxy': { type: 'string', multiple: true },
    help: { type: 'boolean', short: 'h' },
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

const maxActiveJobs = values['max-active-jobs'] === undefined ? undefined : Number(values['max-active-jobs']);
if (maxActiveJobs !== undefined && !(Number.isInteger(maxActiveJobs) && maxActiveJobs >= 1)) {
  console.error(`bad --max-active-jobs ${values['max-active-jobs']}\n${USAGE}`);
  process.exit(2);
}

const maxModelMib = values['max-model-mib'] === undefined ? undefined : Number(values['max-model-mib']);
if (maxModelMib !== undefined && !(Number.isInteger(maxModelMib) && maxModelMib >= 1)) {
  console.error(`bad --max-model-mib ${values['max-model-mib']}\n${USAGE}`);
  process.exit(2);
}

const prefix = values['network-prefix'];
const prefixMatch = prefix === undefined || prefix === 'off' ? null : /^(\d+),(\d+)$/.exec(prefix);
if (prefix !== undefined && prefix !== 'off' && !(prefixMatch && Number(prefixMatch[1]) <= 32 && Number(prefixMatch[2]) <= 128)) {
  console.error(`bad --network-prefix ${prefix}: want V4,V6 (e.g. 24,48) or off\n${USAGE}`);
  process.exit(2);
}
const networkRules = prefix === 'off' ? false : prefixMatch ? { v4: Number(prefixMatch[1]), v6: Number(prefixMatch[2]) } : undefined;

const publicUrl = values['public-url'];
if (publicUrl !== undefined && !/^https?:\/\/[^/?#]+\/?$/.test(publicUrl)) {
  console.error(`bad --public-url ${publicUrl}: want http(s)://host[:port]\n${USAGE}`);
  process.exit(2);
}
const allowOrigins = values['allow-origin'];
for (const origin of allowOrigins ?? []) {
  try {
    checkAllowedOrigin(origin);
  } catch (e) {
    console.error(`bad ${(e as Error).message}\n${USAGE}`);
    process.exit(2);
  }
}
const ttl = values['turn-ttl'];
if (ttl !== undefined && !/^\d+$/.test(ttl)) {
  console.error(`bad --turn-ttl ${ttl}: want whole seconds\n${USAGE}`);
  process.exit(2);
}
const certPath = values['tls-cert'], keyPath = values['tls-key'];
let tls: TlsFiles | undefined;
if ((certPath === undefined) !== (keyPath === undefined)) {
  console.error(`--tls-cert and --tls-key go together: give both or neither\n${USAGE}`);
  process.exit(2);
}
if (certPath !== undefined && keyPath !== undefined) {
  try {
    tls = readTlsFiles(certPath, keyPath);
  } catch (e) {
    console.error(`bad TLS files: ${(e as Error).message}`);
    process.exit(2);
  }
}
let trustProxy: string[] | undefined;
try {
  trustProxy = [...trustedProxies(values['trust-proxy'] ?? [])];
} catch (e) {
  console.error(`bad ${(e as Error).message}\n${USAGE}`);
  process.exit(2);
}
const ice: IceOptions = {
  stun: values.stun, turn: values.turn, turnSecret: process.env.TABFLEET_TURN_SECRET || undefined,
  credentialLifetimeS: ttl === undefined ? undefined : Number(ttl),
};
try {
  // Checked here so a bad URL or a missing secret stops the start before anything opens (the messages never hold the secret).
  new IceIssuer(ice, realClock);
} catch (e) {
  console.error(`bad ICE options: ${(e as Error).message}\n${USAGE}`);
  process.exit(2);
}
const server = await startServer({
  ice,
  tls,
  trustProxy,
  addressLimits: { connections, jobShare },
  maxActiveJobs,
  ...(maxModelMib === undefined ? {} : { maxModelBytes: maxModelMib * 2 ** 20 }),
  networkRules,
  port,
  host: values.host,
  publicUrl,
  allowOrigins,
  allowHosts: values['allow-host'],
  dataDir: values.data ?? process.env.TABFLEET_DATA,
  redisUrl: values.redis ?? process.env.REDIS_URL,
  nodeId: values.node,
  name: values.name ?? process.env.TABFLEET_NAME,
  operator: values.operator ?? process.env.TABFLEET_OPERATOR,
}).catch((e: unknown) => {
  if (!(e instanceof WeakTokenError)) throw e;
  console.error(`[server] ${e.message}`);
  process.exit(2);
});
const base = publicUrl?.replace(/\/+$/, '') ?? server.url;
// The token rides in the fragment: browsers never send it to the server or in a Referer.
console.log(`[server] dashboard sign-in (once; the page removes the token from the address bar): ${base}/apps/dashboard/#token=${encodeURIComponent(server.secrets.token)}`);
console.log(`[server] volunteer: ${base}/apps/volunteer/`);
if (allowOrigins?.length) {
  console.log(`[server] contribute widget for ${allowOrigins.join(', ')}: <script type="module" src="${base}/embed/tabfleet.js"></script><tabfleet-contribute></tabfleet-contribute>`);
}
if (server.secrets.generated) console.log('[server] researcher token generated now and stored in the data directory');
// A line tests and scripts wait for.
console.log(`[server] ready ${server.url}`);

// SIGHUP: the certificate files again (after a renewal, e.g. certbot's deploy hook: kill -HUP PID),
// for new connections; a bad pair is refused and the old one kept.
if (certPath !== undefined && keyPath !== undefined) {
  process.on('SIGHUP', () => {
    try {
      server.reloadTls(readTlsFiles(certPath, keyPath));
    } catch (e) {
      console.error(`[server] SIGHUP: TLS files not reloaded, the old certificate stays: ${(e as Error).message}`);
    }
  });
}

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
