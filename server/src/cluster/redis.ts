// Scale-out: several server nodes share one Redis. Jobs, rounds, metrics, checkpoints and settings
// live in Redis (store/redis.ts); each job's coordinator runs on the node holding its lease
// (`tf:owner:<job>`, renewed by the ownership sweep); other nodes call it over pub/sub; and Socket.IO's
// Redis adapter carries emits to volunteers and dashboards connected to any node.
import { createAdapter } from '@socket.io/redis-adapter';
import { randomBytes } from 'node:crypto';
import { createClient } from 'redis';
import type { Server } from 'socket.io';
import { RedisStore } from '../store/redis';
import type { Store } from '../store/store';
import { decodeCall, encodeCall, type Cluster, type ClusterNews, type HubCall, type HubReply } from './cluster';
import { OWNERSHIP_SWEEP_MS } from './hub';

type Client = ReturnType<typeof createClient>;

/** A lease outlives a few missed renewals, so a busy node does not lose its jobs. */
const LEASE_MS = OWNERSHIP_SWEEP_MS * 5;
const CALL_TIMEOUT_MS = 15_000;
/** Renews this node's lease, or takes one nobody holds: 1 when this node holds it afterwards. */
const CLAIM_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0`;

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
    return (await this.r.eval(CLAIM_SCRIPT, { keys: [`tf:owner:${jobId}`], arguments: [this.nodeId, String(LEASE_MS)] })) === 1;
  }

  async release(jobId: string): Promise<void> {
    const key = `tf:owner:${jobId}`;
    if ((await this.r.get(key)) === this.nodeId) await this.r.del(key);
  }

  ownerOf(jobId: string): Promise<string | null> {
    return this.r.get(`tf:owner:${jobId}`);
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
export async function openRedisBackends(url: string, nodeId: string): Promise<{ store: Store; cluster: Cluster; adapt(io: Server): void; close(): Promise<void> }> {
  const main = createClient({ url });
  // Leases and calls between nodes on a connection of their own: behind the store's writes (a row per
  // member per second, see contributors.ts) a lease renewal waited so long that, in the two-node
  // coordinator bench at 6,000 volunteers, one node lost all its leases and its 30 jobs moved.
  const control = main.duplicate();
  const sub = main.duplicate();
  const adapterPub = main.duplicate();
  const adapterSub = main.duplicate();
  const all = [main, control, sub, adapterPub, adapterSub];
  for (const c of all) c.on('error', (e) => console.error(`[redis] ${(e as Error).message}`));
  await Promise.all(all.map((c) => c.connect()));
  const cluster = new RedisCluster(nodeId, control, sub);
  await cluster.listen();
  return {
    store: new RedisStore(main),
    cluster,
    adapt: (io) => io.adapter(createAdapter(adapterPub, adapterSub)),
    async close() {
      await cluster.close();
      await Promise.all(all.map((c) => c.quit().catch(() => {})));
    },
  };
}
