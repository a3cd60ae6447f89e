// Scale-out: several server nodes share one Redis. Jobs, rounds, metrics, checkpoints and settings
// live in Redis (RedisStore); each job's coordinator runs on the node holding its lease
// (`tf:owner:<job>`, renewed by the ownership sweep); other nodes call it over pub/sub; and Socket.IO's
// Redis adapter carries emits to volunteers and dashboards connected to any node.
import { createAdapter } from '@socket.io/redis-adapter';
import { createHash, randomBytes } from 'node:crypto';
import { commandOptions, createClient } from 'redis';
import type { Server } from 'socket.io';
import type { CheckpointInfo, MetricPoint, VolunteerCredit } from '@tabfleet/protocol';
import type { ContributorRecord, JobRecord, RoundRecord, Store } from '../store/store';
import { decodeCall, encodeCall, type Cluster, type HubCall, type HubReply } from './cluster';
import { OWNERSHIP_SWEEP_MS } from './hub';

type Client = ReturnType<typeof createClient>;

/** A lease outlives a few missed renewals, so a busy node does not lose its jobs. */
const LEASE_MS = OWNERSHIP_SWEEP_MS * 5;
const CALL_TIMEOUT_MS = 15_000;
/** Checkpoint blobs kept per job in Redis (older ones are deleted; the index keeps their info). */
const CHECKPOINT_BLOBS_KEPT = 5;
/** Metric points read per request while looking back for the latest accuracy. */
const METRICS_SCAN_CHUNK = 256;

export class RedisStore implements Store {
  readonly kind = 'redis';
  constructor(private readonly r: Client) {}

  async createJob(j: JobRecord): Promise<void> {
    await this.r.multi().set(`tf:job:${j.id}`, JSON.stringify(j)).zAdd('tf:jobs', { score: j.createdAt, value: j.id }).exec();
  }
  async updateJob(j: JobRecord): Promise<void> {
    await this.r.set(`tf:job:${j.id}`, JSON.stringify(j), { XX: true });
  }
  async getJob(id: string): Promise<JobRecord | null> {
    const text = await this.r.get(`tf:job:${id}`);
    return text ? JSON.parse(text) : null;
  }
  async listJobs(): Promise<JobRecord[]> {
    const ids = await this.r.zRange('tf:jobs', 0, -1);
    if (ids.length === 0) return [];
    const texts = await this.r.mGet(ids.map((id) => `tf:job:${id}`));
    return texts.filter((t): t is string => t !== null).map((t) => JSON.parse(t));
  }
  async saveRound(round: RoundRecord): Promise<void> {
    await this.r.hSet(`tf:rounds:${round.jobId}`, String(round.roundId), JSON.stringify(round));
  }
  async listRounds(jobId: string): Promise<RoundRecord[]> {
    const all = await this.r.hVals(`tf:rounds:${jobId}`);
    return all.map((t) => JSON.parse(t) as RoundRecord).sort((a, b) => a.roundId - b.roundId);
  }
  async addMetric(jobId: string, point: MetricPoint): Promise<void> {
    await this.r.rPush(`tf:metrics:${jobId}`, JSON.stringify(point));
  }
  async metrics(jobId: string, limit: number): Promise<MetricPoint[]> {
    return (await this.r.lRange(`tf:metrics:${jobId}`, -limit, -1)).map((t) => JSON.parse(t));
  }
  async putCheckpoint(jobId: string, info: CheckpointInfo, data: Uint8Array): Promise<void> {
    await this.r.multi().set(`tf:ckpt-data:${jobId}:${info.seq}`, Buffer.from(data)).hSet(`tf:ckpt:${jobId}`, String(info.seq), JSON.stringify(info)).exec();
    const seqs = (await this.r.hKeys(`tf:ckpt:${jobId}`)).map(Number).sort((a, b) => b - a);
    const old = seqs.slice(CHECKPOINT_BLOBS_KEPT).map((s) => `tf:ckpt-data:${jobId}:${s}`);
    if (old.length) await this.r.del(old);
  }
  async latestCheckpoint(jobId: string): Promise<CheckpointInfo | null> {
    const all = (await this.r.hVals(`tf:ckpt:${jobId}`)).map((t) => JSON.parse(t) as CheckpointInfo);
    return all.reduce<CheckpointInfo | null>((best, c) => (!best || c.seq > best.seq ? c : best), null);
  }
  async readCheckpoint(jobId: string, seq: number): Promise<Uint8Array | null> {
    const b = await this.r.get(commandOptions({ returnBuffers: true }), `tf:ckpt-data:${jobId}:${seq}`);
    return b ? new Uint8Array(b) : null;
  }
  async latestAccuracy(jobId: string): Promise<number | null> {
    const key = `tf:metrics:${jobId}`;
    for (let end = -1; ; end -= METRICS_SCAN_CHUNK) {
      const chunk = await this.r.lRange(key, end - METRICS_SCAN_CHUNK + 1, end);
      for (let i = chunk.length - 1; i >= 0; i--) {
        const p = JSON.parse(chunk[i]) as MetricPoint;
        if (p.accuracy !== null) return p.accuracy;
      }
      if (chunk.length < METRICS_SCAN_CHUNK) return null;
    }
  }
  async saveContributors(records: ContributorRecord[]): Promise<void> {
    if (records.length === 0) return;
    const m = this.r.multi();
    for (const c of records) m.hSet(`tf:contrib:${c.jobId}`, c.clientId, JSON.stringify(c)).sAdd(`tf:client-jobs:${c.clientId}`, c.jobId);
    await m.exec();
  }
  async contributors(jobId: string): Promise<ContributorRecord[]> {
    const all = (await this.r.hVals(`tf:contrib:${jobId}`)).map((t) => JSON.parse(t) as ContributorRecord);
    return all.sort((a, b) => a.firstAt - b.firstAt || (a.clientId < b.clientId ? -1 : 1));
  }
  async volunteerCredit(clientId: string): Promise<VolunteerCredit | null> {
    const jobs = await this.r.sMembers(`tf:client-jobs:${clientId}`);
    const rows = await Promise.all(jobs.map((j) => this.r.hGet(`tf:contrib:${j}`, clientId)));
    const records = rows.filter((t): t is string => !!t).map((t) => JSON.parse(t) as ContributorRecord);
    const name = (await this.r.hGet('tf:names', clientId)) ?? null;
    if (records.length === 0 && name === null) return null;
    const sum = (k: 'samples' | 'syncs' | 'computeMs') => records.reduce((s, c) => s + c[k], 0);
    return { displayName: name, jobs: records.length, samples: sum('samples'), syncs: sum('syncs'), computeMs: sum('computeMs') };
  }
  async displayNames(clientIds: string[]): Promise<Map<string, string>> {
    const ids = [...new Set(clientIds)];
    if (ids.length === 0) return new Map();
    const names = await this.r.hmGet('tf:names', ids);
    return new Map(ids.flatMap((id, i) => (names[i] ? [[id, names[i]] as [string, string]] : [])));
  }
  async setDisplayName(clientId: string, name: string | null): Promise<void> {
    if (name === null) await this.r.hDel('tf:names', clientId);
    else await this.r.hSet('tf:names', clientId, name);
  }
  async getSetting(key: string): Promise<string | null> {
    return (await this.r.hGet('tf:settings', key)) ?? null;
  }
  async setSetting(key: string, value: string): Promise<void> {
    await this.r.hSet('tf:settings', key, value);
  }
  async digest(): Promise<string> {
    const h = createHash('sha256');
    const keys = (await this.r.keys('tf:*')).filter((k) => !k.startsWith('tf:owner:')).sort();
    for (const k of keys) {
      const type = await this.r.type(k);
      const value = type === 'string' ? await this.r.get(commandOptions({ returnBuffers: true }), k)
        : type === 'hash' ? Object.entries(await this.r.hGetAll(k)).sort()
        : type === 'list' ? await this.r.lRange(k, 0, -1)
        : type === 'zset' ? await this.r.zRangeWithScores(k, 0, -1)
        : type === 'set' ? (await this.r.sMembers(k)).sort() : type;
      h.update(k).update(JSON.stringify(value));
    }
    return h.digest('hex');
  }
  async close(): Promise<void> {}
}

export class RedisCluster implements Cluster {
  readonly multiNode = true;
  private handler: ((call: HubCall) => Promise<HubReply>) | null = null;
  private broadcastHandlers: ((m: { kind: 'job-created'; jobId: string }) => void)[] = [];
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
    const key = `tf:owner:${jobId}`;
    if ((await this.r.set(key, this.nodeId, { NX: true, PX: LEASE_MS })) === 'OK') return true;
    if ((await this.r.get(key)) !== this.nodeId) return false;
    await this.r.pExpire(key, LEASE_MS);
    return true;
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

  async broadcast(message: { kind: 'job-created'; jobId: string }): Promise<void> {
    await this.r.publish('tf:broadcast', JSON.stringify(message));
  }

  onBroadcast(handler: (message: { kind: 'job-created'; jobId: string }) => void): void {
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
  const sub = main.duplicate();
  const adapterPub = main.duplicate();
  const adapterSub = main.duplicate();
  for (const c of [main, sub, adapterPub, adapterSub]) c.on('error', (e) => console.error(`[redis] ${(e as Error).message}`));
  await Promise.all([main, sub, adapterPub, adapterSub].map((c) => c.connect()));
  const cluster = new RedisCluster(nodeId, main, sub);
  await cluster.listen();
  return {
    store: new RedisStore(main),
    cluster,
    adapt: (io) => io.adapter(createAdapter(adapterPub, adapterSub)),
    async close() {
      await cluster.close();
      await Promise.all([main, sub, adapterPub, adapterSub].map((c) => c.quit().catch(() => {})));
    },
  };
}
