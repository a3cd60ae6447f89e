// Scale-out: several server nodes share one Redis. Jobs, rounds, metrics, checkpoints and settings
// live in Redis (store/redis.ts); each job's coordinator runs on the node holding its lease
// (`tf:owner:<job>`, renewed by the ownership sweep); other nodes call it over pub/sub; and Socket.IO's
// Redis adapter carries emits to volunteers and dashboards connected to any node.
import { createAdapter } from '@socket.io/redis-adapter';
import { VolunteerBus, type BusClients } from './volunteer-bus';
import { randomBytes } from 'node:crypto';
import { createClient } from 'redis';
import type { Server } from 'socket.io';
import { RedisStore, type RedisStoreOptions } from '../store/redis';
import type { Store } from '../store/store';
import { decodeCall, encodeCall, type Cluster, type ClusterNews, type HubCall, type HubReply } from './cluster';
import { OWNERSHIP_SWEEP_MS } from './hub';

type Client = ReturnType<typeof createClient>;

/** A lease outlives a few missed renewals, so a busy node does not lose its jobs. */
const LEASE_MS = OWNERSHIP_SWEEP_MS * 5;
/**
 * How long after its last renewal a node whose lease lapsed keeps its jobs while it still listens for
 * calls (`tf:held:<job>`): its event loop stalled (the two-node coordinator bench at 10,000 volunteers
 * stalled a node ~7.5 s while it admitted, and the other node took its jobs, with their members in the
 * middle of joining). A node that went away stops listening at once and its jobs move after the lease;
 * one that listens but never renews loses them after this.
 */
const HELD_MS = LEASE_MS * 6;
const CALL_TIMEOUT_MS = 15_000;
/**
 * Renews this node's lease, or takes one nobody holds: 1 when this node holds it afterwards, 0 when
 * another node's lease runs. A lapsed lease whose holder renewed within HELD_MS is taken only when
 * ARGV[4] is '1' (its holder no longer listens); otherwise the script answers that holder's id.
 */
const CLAIM_SCRIPT = `
local owner = redis.call('GET', KEYS[1])
if owner == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
  return 1
end
if owner then return 0 end
local held = redis.call('GET', KEYS[2])
if held and held ~= ARGV[1] and ARGV[4] ~= '1' then return held end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
return 1`;
/** Gives up both keys, if this node holds them. */
const RELEASE_SCRIPT = `
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key) end
end`;

export class RedisCluster implements Cluster {
  readonly multiNode = true;
  private handler: ((call: HubCall) => Promise<HubReply>) | null = null;
  private broadcastHandlers: ((m: ClusterNews) => void)[] = [];
  private readonly pending = new Map<string, { resolve(r: HubReply): void; timer: NodeJS.Timeout }>();
  private closed = false;

  constructor(
    readonly nodeId: string,
    private readonly r: Client,
    private readonly sub: Client,
  ) {}

  async listen(): Promise<void> {
    await this.sub.subscribe(`tf:node:${this.nodeId}`, (text) => void this.onRequest(text));
    await this.sub.subscribe(`tf:reply:${this.nodeId}`, (text) => this.onReply(text));
    await this.sub.subscribe('tf:broadcast', (text) => {
      const m = JSON.parse(text);
      for (const h of this.broadcastHandlers) h(m);
    });
  }

  async claim(jobId: string): Promise<boolean> {
    // One round trip (it was three in turn: SET NX, GET, PEXPIRE), so renewing many leases stays quick.
    const keys = [`tf:owner:${jobId}`, `tf:held:${jobId}`];
    const claimed = (force: boolean) => this.r.eval(CLAIM_SCRIPT, { keys, arguments: [this.nodeId, String(LEASE_MS), String(HELD_MS), force ? '1' : '0'] });
    const first = await claimed(false);
    if (typeof first !== 'string') return first === 1;
    // Its lease lapsed: a holder that still listens is stalled, not gone, and renews when it comes back.
    if (await this.listening(first)) return false;
    return (await claimed(true)) === 1;
  }

  async release(jobId: string): Promise<void> {
    await this.r.eval(RELEASE_SCRIPT, { keys: [`tf:owner:${jobId}`, `tf:held:${jobId}`], arguments: [this.nodeId] });
  }

  /** The lease's node; with the lease lapsed, the node that held it while that node still listens (calls wait for it). */
  async ownerOf(jobId: string): Promise<string | null> {
    const [owner, held] = await Promise.all([this.r.get(`tf:owner:${jobId}`), this.r.get(`tf:held:${jobId}`)]);
    if (owner || !held) return owner;
    return (await this.listening(held)) ? held : null;
  }

  /** Whether `nodeId` is subscribed to its calls: its connection to Redis is open (a killed node's closes with it). */
  private async listening(nodeId: string): Promise<boolean> {
    const channel = `tf:node:${nodeId}`;
    return ((await this.r.pubSubNumSub(channel))[channel] ?? 0) > 0;
  }

  call(nodeId: string, call: HubCall): Promise<HubReply> {
    const id = randomBytes(8).toString('hex');
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        resolve({ ok: false, error: { code: 'internal', message: `node ${nodeId} did not answer ${call.op} for job ${call.jobId}` } });
      }, CALL_TIMEOUT_MS);
      this.pending.set(id, { resolve, timer });
      this.r.publish(`tf:node:${nodeId}`, encodeCall({ id, from: this.nodeId, call })).catch((e) => {
        clearTimeout(timer);
        this.pending.delete(id);
        resolve({ ok: false, error: { code: 'internal', message: `publish failed: ${(e as Error).message}` } });
      });
    });
  }

  serve(handler: (call: HubCall) => Promise<HubReply>): void {
    this.handler = handler;
  }

  private async onRequest(text: string): Promise<void> {
    if (this.closed) return;
    const { id, from, call } = decodeCall<{ id: string; from: string; call: HubCall }>(text);
    try {
      const reply: HubReply = this.handler ? await this.handler(call) : { ok: false, error: { code: 'internal', message: 'node not serving' } };
      await this.r.publish(`tf:reply:${from}`, encodeCall({ id, reply }));
    } catch (e) {
      // A call that arrives while this node shuts down finds its Redis client closed; the caller
      // times out and asks the job's next owner. Anything else is worth a line in the log.
      if (!this.closed) console.error(`[redis] ${call.op} for job ${call.jobId} from ${from} failed: ${(e as Error).message}`);
    }
  }

  private onReply(text: string): void {
    const { id, reply } = decodeCall<{ id: string; reply: HubReply }>(text);
    const p = this.pending.get(id);
    if (!p) return;
    clearTimeout(p.timer);
    this.pending.delete(id);
    p.resolve(reply);
  }

  async broadcast(message: ClusterNews): Promise<void> {
    await this.r.publish('tf:broadcast', JSON.stringify(message));
  }

  onBroadcast(handler: (message: ClusterNews) => void): void {
    this.broadcastHandlers.push(handler);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.sub.unsubscribe().catch(() => {});
    for (const p of this.pending.values()) clearTimeout(p.timer);
    this.pending.clear();
  }
}

/** Connects the store, the cluster and Socket.IO's adapter to the Redis at `url`. */
export async function openRedisBackends(
  url: string, nodeId: string, storeOptions: RedisStoreOptions = {},
): Promise<{ store: Store; cluster: Cluster; adapt(io: Server): void; volunteerBus: VolunteerBus; close(): Promise<void> }> {
  const main = createClient({ url });
  // Leases and calls between nodes on a connection of their own: behind the store's writes (a row per
  // member per second, see contributors.ts) a lease renewal waited so long that, in the two-node
  // coordinator bench at 6,000 volunteers, one node lost all its leases and its 30 jobs moved.
  const control = main.duplicate();
  const sub = main.duplicate();
  const adapterPub = main.duplicate();
  const adapterSub = main.duplicate();
  const busSub = main.duplicate();
  const all = [main, control, sub, adapterPub, adapterSub, busSub];
  for (const c of all) c.on('error', (e) => console.error(`[redis] ${(e as Error).message}`));
  await Promise.all(all.map((c) => c.connect()));
  const cluster = new RedisCluster(nodeId, control, sub);
  await cluster.listen();
  return {
    store: new RedisStore(main, storeOptions),
    cluster,
    adapt: (io) => io.adapter(createAdapter(adapterPub, adapterSub)),
    volunteerBus: new VolunteerBus(nodeId, adapterPub as unknown as BusClients, busSub as unknown as BusClients),
    async close() {
      await cluster.close();
      await Promise.all(all.map((c) => c.quit().catch(() => {})));
    },
  };
}
