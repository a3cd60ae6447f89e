// Assembles a server node: store, secrets, cluster, job hub, HTTP routes and Socket.IO namespaces on
// one port. `startServer` is what `server/src/main.ts`, `npm start` and the tests call.
import { LIMITS, NAMESPACES, ROUND_TIMING, serverClock, VOLUNTEER_PING_INTERVAL_MS, VOLUNTEER_PING_TIMEOUT_MS } from '@tabfleet/protocol';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { resolve } from 'node:path';
import { Server } from 'socket.io';
import { loadSecrets, type Secrets } from './auth';
import { LocalCluster, type Cluster } from './cluster/cluster';
import { JobHub } from './cluster/hub';
import { DashboardWatch } from './cluster/watch';
import type { CoordinatorDeps, Timing } from './coordinator/types';
import { DEFAULT_NETWORK_RULES, type NetworkRules } from './coordinator/standing';
import { realClock, type Clock } from './coordinator/types';
import { DownloadSlots, ShardCache } from './http/datasets';
import { handleApi, handleStatic, shardPath, type RouteContext } from './http/routes';
import { sendError, sendJson } from './http/respond';
import {
  AddressRateLimiter, checkAllowedOrigin, clientAddress, DEFAULT_HTTP_RATE_LIMIT, FAILED_AUTH_COST, hostAllowed, hostPolicy, redactUrl, setSecurityHeaders, trustedProxies, type HttpRateLimit,
} from './http/security';
import { useNodeSha256 } from './digests';
import { IceIssuer, type IceOptions } from './ice';
import { checkTls, daysLeft, type TlsFiles } from './http/tls';
import { ServerMetrics } from './metrics';
import { ALL_JOBS_ROOM, attachDashboardNamespace, jobRoom } from './sockets/dashboard';
import { CONNECTION_SLACK, DEFAULT_JOIN_GRACE_MS, SocketEdge } from './sockets/edge';
import type { VolunteerBus } from './cluster/volunteer-bus';
import { LeanVolunteers } from './sockets/lean-volunteers';
import { attachVolunteerNamespace, socketIoEndpoint, volunteerRoom } from './sockets/volunteer';
import { SqliteStore } from './store/sqlite';
import { Uploads } from './uploads';
import { textLoader, type ServedText } from './http/text-datasets';
import type { JobSpec } from '@tabfleet/protocol';

/** The path under /datasets/ of a text the server cuts for a job, or null (images, the generated corpus). */
function servedTextOf(spec: JobSpec): ServedText | null {
  if (spec.dataset === 'fortunes') return 'fortunes';
  if (spec.dataset === 'text-upload' && spec.upload) return `uploads/${spec.upload}` as ServedText;
  return null;
}
import type { CheckpointRetention, Store } from './store/store';
import { CheckpointUploads, DEFAULT_MAX_MODEL_BYTES } from './checkpoint-uploads';
import { ProtocolError } from '@tabfleet/protocol';

const repoRoot = resolve(import.meta.dirname, '../..');

export interface ServerOptions {
  port?: number;
  host?: string;
  /** SQLite file and checkpoints (default ./data). Ignored for state when `redisUrl` is set. */
  dataDir?: string;
  /** Shares state with other nodes through Redis. */
  redisUrl?: string;
  /** Bytes per Redis value of a stored checkpoint (default 8 MiB; under the redis-server's proto-max-bulk-len). */
  redisCheckpointChunkBytes?: number;
  /** Largest model (f32 parameters) a job may have, and checkpoint upload (default 2 GiB): uploads go to `<dataDir>/incoming`. */
  maxModelBytes?: number;
  /** Researcher token; generated and stored at the first start when absent. */
  token?: string;
  staticDir?: string;
  datasetsDir?: string;
  timing?: Partial<Timing>;
  /** The time the round clocks read (deadlines, keep-outs): the real one unless a test gives its own. */
  clock?: Clock;
  /** Volunteers' status heartbeats a second this node budgets for (default HEARTBEATS_PER_SEC; heartbeat.ts). */
  heartbeatsPerSec?: number;
  nodeId?: string;
  /** Shown to volunteers before they contribute: the server's name (default: its address) and who runs it. */
  name?: string;
  operator?: string;
  /**
   * Per-address limits: volunteer connections at once (per node; Socket.IO connections of any kind
   * at most CONNECTION_SLACK more), and the share of one job's slots they may hold. Defaults 32 and
   * 0.5; a node whose volunteers all come through one address (a local benchmark, a proxy without
   * forwarding) raises them.
   */
  addressLimits?: { connections?: number; jobShare?: number };
  /**
   * Prefix lengths that make one network (default /24 and /48): in untrusted jobs one network is never
   * a majority of the members or two seats of a quorum, and keep-outs follow it to new identities.
   * `false` where every volunteer is this machine's (npm start, local benchmarks).
   */
  networkRules?: NetworkRules;
  /** How long a Socket.IO connection may hold no namespace socket before it is closed (default 5 s). */
  joinGraceMs?: number;
  /** How often work is replicated (redundant recompute), per sync (default protocol's REPLICATION_RATE). */
  replicationRate?: { probation: number; trusted: number };
  log?: (line: string) => void;
  /**
   * The URL volunteers reach this server at (e.g. behind `--host 0.0.0.0` or a proxy); checkpoint and
   * shard URLs start with it. Absent: the listen address, or paths relative to the server when it
   * listens on every interface.
   */
  publicUrl?: string;
  /** Origins besides the server's own that may open Socket.IO connections ('*': any). */
  allowOrigins?: string[];
  /**
   * Names besides the server's own (`hostPolicy`: localhost, this machine's name, the listen host, the
   * public URL's host; IP literals always) that requests may carry in their Host header ('*': any).
   */
  allowHosts?: string[];
  /** HTTP requests per client address, and Socket.IO handshakes (default DEFAULT_HTTP_RATE_LIMIT). */
  httpRateLimit?: HttpRateLimit;
  /** How long checkpoint and shard tickets stay valid (default 10 min). */
  ticketLifetimeMs?: number;
  /** Unfinished jobs at once, across the cluster (default LIMITS.maxActiveJobs, 64): researchers' jobs, not volunteers, are what it bounds. */
  maxActiveJobs?: number;
  /** Which checkpoints the store keeps, SQLite or Redis (default DEFAULT_CHECKPOINT_RETENTION). */
  checkpointRetention?: CheckpointRetention;
  /** STUN and TURN servers for volunteers' peer links and the TURN shared secret (ice.ts); absent: host candidates only. */
  ice?: IceOptions;
  /** Terminate TLS here (PEM text, http/tls.ts): the server speaks https:// and wss:// on its one port. */
  tls?: TlsFiles;
  /**
   * Addresses of reverse proxies whose X-Forwarded-For names the client (per-address limits, networks
   * of untrusted jobs). None by default: without it every proxied volunteer is the proxy's address.
   */
  trustProxy?: string[];
}

export const DEFAULT_ADDRESS_LIMITS = { connections: 32, jobShare: 0.5 };

export interface RunningServer {
  url: string;
  port: number;
  nodeId: string;
  secrets: Secrets;
  store: Store;
  hub: JobHub;
  io: Server;
  /** /metrics: the event counters (`get` reads one back), runtime metrics and per-job series. */
  metrics: ServerMetrics;
  /**
   * Serves a renewed certificate and key (checked first, `checkTls`) to new connections; open ones keep
   * theirs. Throws, changing nothing, when the pair is bad or the server was started without TLS.
   */
  reloadTls(tls: TlsFiles): void;
  close(): Promise<void>;
}

async function openStateBackends(opts: ServerOptions, nodeId: string): Promise<{ store: Store; cluster: Cluster; adapt(io: Server): void; volunteerBus: VolunteerBus | null; close(): Promise<void> }> {
  if (!opts.redisUrl) {
    const store = new SqliteStore(resolve(opts.dataDir ?? 'data'), { retention: opts.checkpointRetention });
    return { store, cluster: new LocalCluster(nodeId), adapt: () => {}, volunteerBus: null, close: () => store.close() };
  }
  const { openRedisBackends } = await import('./cluster/redis');
  return openRedisBackends(opts.redisUrl, nodeId, { retention: opts.checkpointRetention, checkpointChunkBytes: opts.redisCheckpointChunkBytes });
}

export async function startServer(opts: ServerOptions = {}): Promise<RunningServer> {
  useNodeSha256();
  const log = opts.log ?? ((line: string) => console.log(`[server] ${line}`));
  const nodeId = opts.nodeId ?? `node-${randomBytes(3).toString('hex')}`;
  // Checked before anything opens: an origin no browser sends would silently never match.
  const allowOrigins = (opts.allowOrigins ?? []).map(checkAllowedOrigin);
  const clock = opts.clock ?? realClock;
  const ice = new IceIssuer(opts.ice ?? {}, clock);
  const tls = opts.tls && checkTls(opts.tls);
  const trusted = trustedProxies(opts.trustProxy ?? []);
  const backends = await openStateBackends(opts, nodeId);
  const { store, cluster } = backends;
  const uploads = new Uploads(resolve(opts.dataDir ?? 'data', 'uploads'));
  // Upload URLs name this node: the coordinator that hands one out holds the upload (publicBase is known once listening).
  const checkpointUploads = new CheckpointUploads(resolve(opts.dataDir ?? 'data', 'incoming'), opts.maxModelBytes ?? DEFAULT_MAX_MODEL_BYTES,
    (id) => `${publicBase()}/api/checkpoint-uploads/${id}`);
  let secrets: Secrets;
  try {
    secrets = await loadSecrets(store, { value: opts.token ?? process.env.TABFLEET_TOKEN, fromEnv: opts.token === undefined }, { ticketLifetimeMs: opts.ticketLifetimeMs });
  } catch (e) {
    await backends.close();
    throw e;
  }
  const metrics = new ServerMetrics();
  // HTTP/1.1 either way: Socket.IO's WebSocket upgrade is an HTTP/1.1 request (over TLS too).
  const httpServer = tls ? createTlsServer({ cert: tls.cert, key: tls.key }) : createServer();
  const hosts = hostPolicy({ listenHost: opts.host ?? '127.0.0.1', publicUrl: opts.publicUrl, extra: opts.allowHosts });
  const limiter = new AddressRateLimiter(opts.httpRateLimit ?? DEFAULT_HTTP_RATE_LIMIT);
  const maxConnectionsPerAddress = opts.addressLimits?.connections ?? DEFAULT_ADDRESS_LIMITS.connections;
  // Host, Origin (same origin, or none from Node clients, unless listed), the per-address bucket and
  // connection cap at every engine handshake; connections without a namespace closed after the grace.
  const edge = new SocketEdge({
    hosts, allowOrigins, limiter, maxConnectionsPerAddress: maxConnectionsPerAddress + CONNECTION_SLACK, joinGraceMs: opts.joinGraceMs ?? DEFAULT_JOIN_GRACE_MS,
    trustedProxies: trusted, count: metrics.count, log,
  });
  const io = new Server(httpServer, {
    // The largest legitimate message: a model attachment and the rest of its event (LIMITS). Anything
    // smaller refuses real star updates and checkpoints; what it lets one address hold is bounded by
    // the connection cap (one message in flight each: the decoder takes one attachment per packet).
    maxHttpBufferSize: LIMITS.maxSocketMessageBytes,
    serveClient: false,
    // Stated, not left to defaults (Socket.IO's memory guide): a deflate context per WebSocket costs
    // hundreds of KiB, and events are small JSON; polling bodies are not compressed either.
    perMessageDeflate: false,
    httpCompression: false,
    pingInterval: VOLUNTEER_PING_INTERVAL_MS,
    pingTimeout: VOLUNTEER_PING_TIMEOUT_MS,
    ...edge.serverOptions(),
    cors: { origin: allowOrigins.includes('*') ? true : allowOrigins, credentials: false },
  });
  backends.adapt(io);
  edge.attach(io, [NAMESPACES.volunteer, NAMESPACES.dashboard]);
  // Only the named namespaces serve anyone: the default one would otherwise accept anonymous sockets and their events.
  io.of('/').use((_socket, next) => next(Object.assign(new Error('no such namespace: connect to /volunteer or /dashboard'), { data: { code: 'unknown_event' } })));
  const volunteers = io.of(NAMESPACES.volunteer);
  // The same namespace at VOLUNTEER_SOCKET_PATH, without Socket.IO's objects.
  const lean = new LeanVolunteers(httpServer, {
    edge, joinGraceMs: opts.joinGraceMs ?? DEFAULT_JOIN_GRACE_MS, pingIntervalMs: VOLUNTEER_PING_INTERVAL_MS, pingTimeoutMs: VOLUNTEER_PING_TIMEOUT_MS, log,
  });
  // An event for volunteers: those connected here get it directly, on whichever endpoint; the rest are
  // on other nodes (with Redis), where it is published once for them.
  const deliverHere = (rooms: readonly string[], event: string, args: unknown[]): string[] => {
    const elsewhere: string[] = [];
    const socketIoHere: string[] = [];
    for (const room of lean.emitTo(rooms, event, args)) (volunteers.adapter.rooms.has(room) ? socketIoHere : elsewhere).push(room);
    if (socketIoHere.length) volunteers.local.to(socketIoHere).emit(event, ...args);
    return elsewhere;
  };
  await backends.volunteerBus?.listen((d) => void deliverHere(d.rooms, d.event, d.args));
  const dashboards = io.of(NAMESPACES.dashboard);
  // Several nodes: the rooms dashboards here are in (a job's, or all jobs'), shared with the other nodes.
  const watchedHere = new Set<string>();
  const watch = opts.redisUrl ? new DashboardWatch(cluster, realClock, () => watchedHere, log) : null;
  if (watch) {
    const dashboardRoom = (room: unknown): room is string => typeof room === 'string' && (room === ALL_JOBS_ROOM || room.startsWith(jobRoom('')));
    dashboards.adapter.on('create-room', (room) => {
      if (!dashboardRoom(room)) return;
      watchedHere.add(room);
      watch.changed();
    });
    dashboards.adapter.on('delete-room', (room) => {
      if (!dashboardRoom(room)) return;
      watchedHere.delete(room);
      watch.changed();
    });
    watch.start();
  }
  let url = '';
  // Where volunteers fetch checkpoints and shards: the public URL, the listen URL, or (listening on
  // every interface with no public URL) paths the worker resolves against the server it connected to.
  const wildcardHost = ['0.0.0.0', '::'].includes(opts.host ?? '');
  const publicBase = () => (opts.publicUrl ? opts.publicUrl.replace(/\/+$/, '') : wildcardHost ? '' : url);

  const deps: CoordinatorDeps = {
    store,
    clock,
    timing: { ...ROUND_TIMING, ...opts.timing },
    toVolunteer: (ids, event, ...args) => {
      const elsewhere = deliverHere(Array.isArray(ids) ? ids.map(volunteerRoom) : [volunteerRoom(ids)], event, args);
      if (elsewhere.length) backends.volunteerBus?.publish({ rooms: elsewhere, event, args });
    },
    toDashboards: (jobId, event, ...args) => {
      const rooms = event === 'job:update' ? [jobRoom(jobId), ALL_JOBS_ROOM] : [jobRoom(jobId)];
      // With Redis, published only where some node has a dashboard in one of the rooms.
      const watchedRooms = watch ? rooms.filter((r) => watch.watched(r)) : rooms;
      if (watchedRooms.length) dashboards.to(watchedRooms).emit(event, ...args);
    },
    // With Redis the watching dashboard may be on another node: each node announces what its own watch.
    watched: (jobId) => (watch ? watch.watched(jobRoom(jobId)) : (dashboards.adapter.rooms.get(jobRoom(jobId))?.size ?? 0) > 0),
    checkpointUploads,
    checkpointUrl: (jobId, seq) => `${publicBase()}/api/jobs/${jobId}/checkpoints/${seq}?ticket=${secrets.ticket(jobId, seq)}`,
    shardUrl: (jobId, spec, index, count) => {
      if (spec.dataset === 'fashion-mnist') return `${publicBase()}${shardPath(secrets, jobId, spec.dataset, index, count, spec.seed)}`;
      if (spec.dataset === 'image-upload' && spec.upload) return `${publicBase()}${shardPath(secrets, jobId, `uploads/${spec.upload}`, index, count, spec.seed)}`;
      // A served text corpus, cut for the job's model (the generated corpus is made by the workers).
      const text = servedTextOf(spec);
      if (text && spec.tokenizer && spec.gpt) return `${publicBase()}${shardPath(secrets, jobId, text, index, count, spec.seed, { tokenizer: spec.tokenizer, context: spec.gpt.context })}`;
      return null;
    },
    count: metrics.count,
    log,
    addressJobShare: opts.addressLimits?.jobShare ?? DEFAULT_ADDRESS_LIMITS.jobShare,
    networkRules: opts.networkRules ?? DEFAULT_NETWORK_RULES,
    replicationRate: opts.replicationRate,
    ice,
  };
  const hub = new JobHub(deps, cluster, opts.maxActiveJobs);
  await hub.start();
  const volunteerNsp = attachVolunteerNamespace([socketIoEndpoint(volunteers), lean], hub, store, {
    maxConnectionsPerAddress, count: deps.count, log, heartbeatsPerSec: opts.heartbeatsPerSec, clock: opts.clock ?? serverClock,
  });
  attachDashboardNamespace(io, hub, store, { tokenMatches: secrets.tokenMatches, failedToken: (address) => edge.failedAuth(address), count: deps.count, log, clock: opts.clock ?? serverClock });

  metrics.watch({
    volunteersConnected: () => volunteers.sockets.size + lean.size,
    dashboardsConnected: () => dashboards.sockets.size,
    jobStates: async () => (await store.listJobs()).map((j) => j.state),
    runningJobs: () => hub.running(),
  });

  const startedAt = Date.now();
  const ctx: RouteContext = {
    hub, store, secrets, nodeId, startedAt, allowOrigins, trustedProxies: trusted,
    staticDir: resolve(opts.staticDir ?? resolve(repoRoot, 'dist')),
    datasetsDir: opts.datasetsDir ?? process.env.FASHION_MNIST_DIR ?? '/usr/share/datasets/fashion-mnist',
    identity: { name: opts.name ?? '', operator: opts.operator ?? null },
    shards: new ShardCache(),
    shardSlots: new DownloadSlots(),
    uploads,
    checkpointUploads,
    texts: textLoader(uploads),
    log,
    metrics,
  };
  httpServer.on('request', (req, res) => {
    // Socket.IO answers its own path (its handshakes take from the same bucket, in `edge`); everything else is ours.
    if (req.url?.startsWith('/socket.io/')) return;
    setSecurityHeaders(res);
    const address = clientAddress(req, trusted);
    const waitMs = limiter.take(address);
    if (waitMs > 0) {
      metrics.count('http_rate_limited');
      res.setHeader('retry-after', String(Math.ceil(waitMs / 1000)));
      sendError(res, new ProtocolError('rate_limited', 'too many requests from this address'));
      return;
    }
    if (!hostAllowed(req.headers.host, hosts)) {
      metrics.count('http_misdirected');
      // Which names it does answer to is for the log (at start), not for whoever asks.
      const message = `Host ${JSON.stringify(req.headers.host?.slice(0, 100))} is not a name of this server (the operator adds names with --allow-host)`;
      sendJson(res, 421, { error: { code: 'bad_request', message } });
      return;
    }
    handleApi(ctx, req, res)
      .then((handled) => handled || handleStatic(ctx, req, res))
      .catch((e) => {
        // A bad token or ticket costs more than a request: guessing goes at a tenth of the rate.
        if (e instanceof ProtocolError && e.code === 'unauthorized') limiter.charge(address, FAILED_AUTH_COST);
        // Query strings may carry tickets: never logged.
        log(`HTTP ${req.method} ${redactUrl(req.url).slice(0, 200)} failed: ${(e as Error).stack}`);
        if (!res.headersSent) sendError(res, e);
      });
  });

  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((r, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(opts.port ?? 0, host, () => r());
  });
  const addr = httpServer.address();
  if (!addr || typeof addr === 'string') throw new Error('server has no TCP address');
  url = `${tls ? 'https' : 'http'}://${host === '0.0.0.0' ? '127.0.0.1' : host}:${addr.port}`;
  if (!ctx.identity.name) ctx.identity.name = new URL(url).host;
  log(`node ${nodeId} listening on ${url} (store: ${store.kind})`);
  if (wildcardHost && !opts.publicUrl) log(`listening on every interface without --public-url: volunteers get checkpoint and shard paths relative to the server they connected to`);
  if (tls) log(`TLS: the certificate expires in ${daysLeft(tls.cert)} days`);
  if (trusted.size) log(`X-Forwarded-For believed from ${[...trusted].join(', ')} (--trust-proxy)`);
  if (ice.active) log(`ICE servers for volunteers' peer links: ${ice.describe()}`);
  else if (opts.ice?.turnSecret) log('a TURN shared secret is set but no --turn server: it is unused');
  if (!hosts.any) log(`answering requests whose Host is an IP address or one of: ${[...hosts.names].join(', ')} (more with --allow-host)`);

  let closed = false;
  return {
    url, port: addr.port, nodeId, secrets, store, hub, io, metrics,
    reloadTls(next) {
      if (!tls) throw new Error('this server was started without TLS: there is no certificate to replace');
      const checked = checkTls(next);
      (httpServer as ReturnType<typeof createTlsServer>).setSecureContext({ cert: checked.cert, key: checked.key });
      log(`TLS: a new certificate loaded, expires in ${daysLeft(checked.cert)} days`);
    },
    async close() {
      if (closed) return;
      closed = true;
      volunteerNsp.close();
      lean.close();
      watch?.stop();
      await hub.close();
      const httpClosed = new Promise<void>((r) => io.close(() => r()));
      // Downloads still streaming would hold the close open; a closed server owes them nothing.
      httpServer.closeAllConnections();
      await httpClosed;
      await backends.close();
    },
  };
}
