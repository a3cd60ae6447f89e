// The Store in Redis, for several server nodes sharing one: jobs, rounds, metrics, contributors,
// checkpoints (the latest few, in chunks: redis-checkpoints.ts) and settings under `tf:` keys. cluster/redis.ts connects it.
// Display names are `tf:names`; the ids among them with no committed sync yet are `tf:names-unproven`,
// scored by `tf:names-seq` (the order they were set), and kept to `maxUnprovenNames`. A job's penalty
// records are the hash `tf:penalties:<job>`, field `<kind>:<key>`, written by a script that keeps the newer.
import type { CheckpointInfo, MetricPoint, VolunteerCredit } from '@tabfleet/protocol';
import { createHash } from 'node:crypto';
import { commandOptions, type createClient } from 'redis';
import { RedisCheckpoints } from './redis-checkpoints';
import {
  DEFAULT_CHECKPOINT_RETENTION, MAX_UNPROVEN_NAMES, metricKind,
  type CheckpointRanges, type CheckpointRetention, type ContributorRecord, type JobRecord, type PenaltyRecord, type ReputationChange, type ReputationRecord, type RoundRecord, type Store,
} from './store';

type Client = ReturnType<typeof createClient>;

/**
 * Sets each (field, record, offences, until) of ARGV in the hash KEYS[1] unless the stored record is
 * newer (store.ts's newerPenalty): one script, so a concurrent write cannot slip between read and set.
 */
const SAVE_PENALTIES = `
for i = 1, #ARGV, 4 do
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  local keep = false
  if cur then
    local c = cjson.decode(cur)
    local offences, untilMs = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
    keep = c.offences > offences or (c.offences == offences and c['until'] > untilMs)
  end
  if not keep then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
return 0`;

/** Metric points read per request while looking back for the latest accuracy. */
const METRICS_SCAN_CHUNK = 256;

export interface RedisStoreOptions {
  retention?: CheckpointRetention;
  maxUnprovenNames?: number;
  /** Bytes per stored value of a checkpoint (redis-checkpoints.ts; default 8 MiB). */
  checkpointChunkBytes?: number;
}

export class RedisStore implements Store {
  readonly kind = 'redis';
  private readonly maxUnprovenNames: number;
  private readonly checkpoints: RedisCheckpoints;
  constructor(private readonly r: Client, opts: RedisStoreOptions = {}) {
    this.maxUnprovenNames = opts.maxUnprovenNames ?? MAX_UNPROVEN_NAMES;
    this.checkpoints = new RedisCheckpoints(r, opts.retention ?? DEFAULT_CHECKPOINT_RETENTION, opts.checkpointChunkBytes);
  }

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
  /** The list keeps first-stored order; `tf:metric-at:<job>` maps (seq, kind) to its index so a repeat replaces it. */
  async addMetric(jobId: string, point: MetricPoint): Promise<void> {
    const field = `${point.seq}:${metricKind(point)}`, text = JSON.stringify(point);
    const at = await this.r.hGet(`tf:metric-at:${jobId}`, field);
    if (at !== undefined && at !== null) await this.r.lSet(`tf:metrics:${jobId}`, Number(at), text);
    else await this.r.hSet(`tf:metric-at:${jobId}`, field, String((await this.r.rPush(`tf:metrics:${jobId}`, text)) - 1));
  }
  async metricsPage(jobId: string, cursor: number, limit: number): Promise<{ points: MetricPoint[]; next: number | null }> {
    const texts = await this.r.lRange(`tf:metrics:${jobId}`, cursor, cursor + limit - 1);
    return { points: texts.map((t) => JSON.parse(t)), next: texts.length < limit ? null : cursor + texts.length };
  }
  async metrics(jobId: string, limit: number): Promise<MetricPoint[]> {
    return (await this.r.lRange(`tf:metrics:${jobId}`, -limit, -1)).map((t) => JSON.parse(t));
  }
  putCheckpoint(jobId: string, info: CheckpointInfo, data: Uint8Array): Promise<void> {
    return this.checkpoints.put(jobId, info, data);
  }
  /** Stored a chunk at a time, never read in whole; the file is deleted once stored. */
  putCheckpointFile(jobId: string, info: CheckpointInfo, file: string): Promise<void> {
    return this.checkpoints.putFile(jobId, info, file);
  }
  latestCheckpoint(jobId: string): Promise<CheckpointInfo | null> {
    return this.checkpoints.latest(jobId);
  }
  readCheckpoint(jobId: string, seq: number): Promise<Uint8Array | null> {
    return this.checkpoints.read(jobId, seq);
  }
  checkpointRanges(jobId: string, seq: number): Promise<CheckpointRanges | null> {
    return this.checkpoints.ranges(jobId, seq);
  }
  async latestAccuracy(jobId: string): Promise<number | null> {
    const key = `tf:metrics:${jobId}`;
    // The newest sync's among the last chunk that holds any: an evaluation recorded late (a slow
    // evaluator) trails newer ones by a few syncs at most, far fewer than a chunk's points.
    for (let end = -1; ; end -= METRICS_SCAN_CHUNK) {
      const chunk = await this.r.lRange(key, end - METRICS_SCAN_CHUNK + 1, end);
      const evaluated = chunk.map((t) => JSON.parse(t) as MetricPoint).filter((p) => p.accuracy !== null);
      if (evaluated.length) return evaluated.reduce((a, b) => (b.seq >= a.seq ? b : a)).accuracy;
      if (chunk.length < METRICS_SCAN_CHUNK) return null;
    }
  }
  async saveContributors(records: ContributorRecord[]): Promise<void> {
    if (records.length === 0) return;
    const m = this.r.multi();
    for (const c of records) m.hSet(`tf:contrib:${c.jobId}`, c.clientId, JSON.stringify(c)).sAdd(`tf:client-jobs:${c.clientId}`, c.jobId);
    const proven = records.filter((c) => c.syncs > 0).map((c) => c.clientId);
    if (proven.length) m.zRem('tf:names-unproven', proven);
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
    if (name === null) return void (await this.r.multi().hDel('tf:names', clientId).zRem('tf:names-unproven', clientId).exec());
    if (await this.proven(clientId)) return void (await this.r.hSet('tf:names', clientId, name));
    const seq = await this.r.incr('tf:names-seq');
    await this.r.multi().hSet('tf:names', clientId, name).zAdd('tf:names-unproven', { score: seq, value: clientId }).exec();
    const excess = (await this.r.zCard('tf:names-unproven')) - this.maxUnprovenNames;
    if (excess <= 0) return;
    const dropped = (await this.r.zPopMinCount('tf:names-unproven', excess)).map((e) => e.value);
    if (dropped.length) await this.r.hDel('tf:names', dropped);
  }
  /** Whether the id was a member of a committed sync in some job. */
  private async proven(clientId: string): Promise<boolean> {
    const jobs = await this.r.sMembers(`tf:client-jobs:${clientId}`);
    const rows = jobs.length ? await Promise.all(jobs.map((j) => this.r.hGet(`tf:contrib:${j}`, clientId))) : [];
    return rows.some((t) => !!t && (JSON.parse(t) as ContributorRecord).syncs > 0);
  }
  async reputations(clientIds: string[]): Promise<Map<string, ReputationRecord>> {
    const out = new Map<string, ReputationRecord>();
    for (const id of new Set(clientIds)) {
      const h = await this.r.hGetAll(`tf:rep:${id}`);
      if (h.verified === undefined) continue;
      out.set(id, {
        clientId: id, verified: Number(h.verified), verifiedSinceFault: Number(h.verifiedSinceFault ?? 0), faults: Number(h.faults ?? 0),
        lastFault: h.lastFault ?? null, lastFaultAt: h.lastFaultAt === undefined ? null : Number(h.lastFaultAt),
      });
    }
    return out;
  }
  async addReputation(clientId: string, change: ReputationChange): Promise<void> {
    const key = `tf:rep:${clientId}`;
    const m = this.r.multi().hIncrBy(key, 'verified', change.verified ?? 0).hIncrBy(key, 'faults', change.fault ? 1 : 0);
    if (change.fault) m.hSet(key, { lastFault: change.fault.reason, lastFaultAt: String(change.fault.at), verifiedSinceFault: '0' });
    m.hIncrBy(key, 'verifiedSinceFault', change.verified ?? 0);
    await m.exec();
  }
  async penalties(jobId: string): Promise<PenaltyRecord[]> {
    return (await this.r.hVals(`tf:penalties:${jobId}`)).map((t) => JSON.parse(t) as PenaltyRecord);
  }
  async savePenalties(jobId: string, records: PenaltyRecord[]): Promise<void> {
    if (records.length === 0) return;
    const args = records.flatMap((p) => {
      const r: PenaltyRecord = { kind: p.kind, key: p.key, offences: p.offences, until: p.until, reason: p.reason };
      return [`${r.kind}:${r.key}`, JSON.stringify(r), String(r.offences), String(r.until)];
    });
    await this.r.eval(SAVE_PENALTIES, { keys: [`tf:penalties:${jobId}`], arguments: args });
  }
  async getSetting(key: string): Promise<string | null> {
    return (await this.r.hGet('tf:settings', key)) ?? null;
  }
  async setSetting(key: string, value: string): Promise<void> {
    await this.r.hSet('tf:settings', key, value);
  }
  async digest(): Promise<string> {
    const h = createHash('sha256');
    const keys = (await this.r.keys('tf:*')).filter((k) => !k.startsWith('tf:owner:') && !k.startsWith('tf:held:')).sort();
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
