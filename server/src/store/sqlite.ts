// The embedded store: one SQLite file (WAL) under the data directory, checkpoint bytes as files
// beside it (`checkpoints/<job>/<seq>.safetensors`), written to a temp name, synced, renamed and the
// directory synced, so a crash never leaves a torn checkpoint in the index. The directory is private to
// the user (0700, files 0600): it holds the researcher token and the ticket key.
import Database from 'better-sqlite3';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { CheckpointInfo, MetricPoint, VolunteerCredit } from '@tabfleet/protocol';
import {
  checkpointsToPrune, DEFAULT_CHECKPOINT_RETENTION, MAX_UNPROVEN_NAMES, metricKind, verifiedCheckpoint,
  type CheckpointRetention, type ContributorRecord, type JobRecord, type PenaltyRecord, type ReputationChange, type ReputationRecord, type RoundRecord, type Store,
} from './store';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL,
  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, seq INTEGER NOT NULL, step INTEGER NOT NULL,
  end_reason TEXT, notice TEXT
);
CREATE TABLE IF NOT EXISTS rounds (
  job_id TEXT NOT NULL, round_id INTEGER NOT NULL, seq INTEGER NOT NULL, mode TEXT NOT NULL,
  members TEXT NOT NULL, outcome TEXT NOT NULL, started_at INTEGER NOT NULL, ended_at INTEGER,
  detail TEXT NOT NULL, PRIMARY KEY (job_id, round_id)
);
CREATE TABLE IF NOT EXISTS metrics (
  job_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, step INTEGER NOT NULL, time INTEGER NOT NULL,
  loss REAL, accuracy REAL, samples_per_sec REAL, bytes_sent REAL, workers INTEGER NOT NULL, vouchers INTEGER
);
CREATE TABLE IF NOT EXISTS checkpoints (
  job_id TEXT NOT NULL, seq INTEGER NOT NULL, step INTEGER NOT NULL, bytes INTEGER NOT NULL,
  sha256 TEXT NOT NULL, created_at INTEGER NOT NULL, path TEXT NOT NULL, PRIMARY KEY (job_id, seq)
);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS contributors (
  job_id TEXT NOT NULL, client_id TEXT NOT NULL, volunteer_id TEXT NOT NULL, adapter TEXT NOT NULL, backend TEXT NOT NULL,
  step INTEGER NOT NULL, bytes_sent INTEGER NOT NULL, bytes_received INTEGER NOT NULL, samples INTEGER NOT NULL,
  syncs INTEGER NOT NULL, compute_ms INTEGER NOT NULL, first_at INTEGER NOT NULL, last_at INTEGER NOT NULL, left_reason TEXT,
  PRIMARY KEY (job_id, client_id)
);
CREATE INDEX IF NOT EXISTS contributors_client ON contributors (client_id);
CREATE TABLE IF NOT EXISTS volunteers (client_id TEXT PRIMARY KEY, display_name TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reputation (
  client_id TEXT PRIMARY KEY, verified INTEGER NOT NULL, faults INTEGER NOT NULL, last_fault TEXT, last_fault_at INTEGER,
  verified_since_fault INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS penalties (
  job_id TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, offences INTEGER NOT NULL, until INTEGER NOT NULL, reason TEXT NOT NULL,
  PRIMARY KEY (job_id, kind, key)
);
`;

/** Run after SCHEMA: metrics stored before they had a kind get one, lose their duplicates, and a unique key. */
const MIGRATE_METRICS = `
CREATE TABLE metrics_keyed (
  job_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, step INTEGER NOT NULL, time INTEGER NOT NULL,
  loss REAL, accuracy REAL, samples_per_sec REAL, bytes_sent REAL, workers INTEGER NOT NULL, vouchers INTEGER
);
INSERT INTO metrics_keyed SELECT job_id, seq, CASE WHEN bytes_sent IS NULL THEN 'eval' ELSE 'sync' END, step, time, loss, accuracy, samples_per_sec, bytes_sent, workers, NULL
  FROM metrics WHERE rowid IN (SELECT MIN(rowid) FROM metrics GROUP BY job_id, seq, bytes_sent IS NULL) ORDER BY rowid;
DROP TABLE metrics;
ALTER TABLE metrics_keyed RENAME TO metrics;
`;
const METRICS_KEY = 'CREATE UNIQUE INDEX IF NOT EXISTS metrics_key ON metrics (job_id, seq, kind)';

/**
 * Writes `data` to `path` through a temp file: synced, renamed into place, and the rename synced. On
 * libuv's thread pool, not the event loop: at 10,000 volunteers the jobs checkpoint ~8 times a second,
 * and synchronous fsyncs on a disk busy with other work held the loop for seconds (coordinator bench).
 */
async function writeDurably(path: string, data: Uint8Array): Promise<void> {
  // Its own temp name: two writes of one path at once (a re-sent upload) must not share one.
  const tmp = `${path}.${randomBytes(4).toString('hex')}.tmp`;
  const file = await open(tmp, 'w', 0o600);
  try {
    await file.writeFile(data);
    await file.sync();
  } finally {
    await file.close();
  }
  await rename(tmp, path);
  await syncDirectory(join(path, '..'));
}

/** Makes a rename in `path` durable (on the thread pool, as writeDurably). */
async function syncDirectory(path: string): Promise<void> {
  const dir = await open(path, 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}

interface JobRow {
  id: string; name: string; spec: string; state: string; created_at: number; updated_at: number; seq: number; step: number; end_reason: string | null;
  notice: string | null;
}
interface RoundRow {
  job_id: string; round_id: number; seq: number; mode: string; members: string; outcome: string; started_at: number; ended_at: number | null; detail: string;
}
interface MetricRow {
  seq: number; step: number; time: number; loss: number | null; accuracy: number | null; samples_per_sec: number | null; bytes_sent: number | null; workers: number;
  vouchers: number | null;
}
interface ContributorRow {
  job_id: string; client_id: string; volunteer_id: string; adapter: string; backend: string; step: number; bytes_sent: number; bytes_received: number;
  samples: number; syncs: number; compute_ms: number; first_at: number; last_at: number; left_reason: string | null;
}
interface CheckpointRow {
  seq: number; step: number; bytes: number; sha256: string; created_at: number; path: string;
}

const toJob = (r: JobRow): JobRecord => ({
  id: r.id, name: r.name, spec: JSON.parse(r.spec), state: r.state as JobRecord['state'], createdAt: r.created_at, updatedAt: r.updated_at,
  seq: r.seq, step: r.step, ...(r.end_reason ? { endReason: r.end_reason } : {}), ...(r.notice ? { notice: r.notice } : {}),
});
const toRound = (r: RoundRow): RoundRecord => ({
  jobId: r.job_id, roundId: r.round_id, seq: r.seq, mode: r.mode as RoundRecord['mode'], members: JSON.parse(r.members),
  outcome: r.outcome as RoundRecord['outcome'], startedAt: r.started_at, endedAt: r.ended_at, detail: r.detail,
});
const toMetric = (r: MetricRow): MetricPoint => ({
  seq: r.seq, step: r.step, time: r.time, loss: r.loss, accuracy: r.accuracy, samplesPerSec: r.samples_per_sec, bytesSent: r.bytes_sent, workers: r.workers,
  vouchers: r.vouchers ?? null,
});
const toContributor = (r: ContributorRow): ContributorRecord => ({
  jobId: r.job_id, clientId: r.client_id, volunteerId: r.volunteer_id, adapter: r.adapter, backend: r.backend as ContributorRecord['backend'], step: r.step,
  bytesSent: r.bytes_sent, bytesReceived: r.bytes_received, samples: r.samples, syncs: r.syncs, computeMs: r.compute_ms, firstAt: r.first_at, lastAt: r.last_at,
  leftReason: r.left_reason,
});
const toCheckpoint = (r: CheckpointRow): CheckpointInfo => ({ seq: r.seq, step: r.step, bytes: r.bytes, sha256: r.sha256, createdAt: r.created_at });

export class SqliteStore implements Store {
  readonly kind = 'sqlite';
  private readonly db: Database.Database;
  private readonly checkpointDir: string;
  private readonly statements = new Map<string, Database.Statement>();

  private readonly retention: CheckpointRetention;
  private readonly maxUnprovenNames: number;

  constructor(dataDir: string, opts: { retention?: CheckpointRetention; maxUnprovenNames?: number } = {}) {
    this.retention = opts.retention ?? DEFAULT_CHECKPOINT_RETENTION;
    this.maxUnprovenNames = opts.maxUnprovenNames ?? MAX_UNPROVEN_NAMES;
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    chmodSync(dataDir, 0o700);
    this.checkpointDir = join(dataDir, 'checkpoints');
    const file = join(dataDir, 'tabfleet.sqlite');
    // SQLite gives its -wal and -shm files the mode of the database file.
    closeSync(openSync(file, 'a', 0o600));
    chmodSync(file, 0o600);
    for (const side of ['-wal', '-shm']) if (existsSync(file + side)) chmodSync(file + side, 0o600);
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    this.db.exec(SCHEMA);
    if (!this.hasColumn('metrics', 'kind')) this.db.transaction(() => this.db.exec(MIGRATE_METRICS))();
    else this.addColumnIfMissing('metrics', 'vouchers', 'INTEGER');
    this.db.exec(METRICS_KEY);
    // Reputations stored before probation counted from the last fault start it again: the cautious side.
    this.addColumnIfMissing('reputation', 'verified_since_fault', 'INTEGER NOT NULL DEFAULT 0');
    this.addColumnIfMissing('jobs', 'notice', 'TEXT');
  }

  /** A database from before `column` existed gains it (tables and columns here are this file's, never input). */
  private addColumnIfMissing(table: string, column: string, type: string): void {
    if (!this.hasColumn(table, column)) this.db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${type}`);
  }

  private hasColumn(table: string, column: string): boolean {
    return this.db.prepare('SELECT 1 FROM pragma_table_info(?) WHERE name = ?').get(table, column) !== undefined;
  }

  /** Prepared once per SQL text: preparing costs more than most of these queries. */
  private sql(text: string): Database.Statement {
    let st = this.statements.get(text);
    if (!st) this.statements.set(text, (st = this.db.prepare(text)));
    return st;
  }

  async createJob(j: JobRecord): Promise<void> {
    this
      .sql('INSERT INTO jobs (id, name, spec, state, created_at, updated_at, seq, step, end_reason, notice) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)')
      .run(j.id, j.name, JSON.stringify(j.spec), j.state, j.createdAt, j.updatedAt, j.seq, j.step, j.endReason ?? null, j.notice ?? null);
  }

  async updateJob(j: JobRecord): Promise<void> {
    this.sql('UPDATE jobs SET state = ?, updated_at = ?, seq = ?, step = ?, end_reason = ?, notice = ? WHERE id = ?')
      .run(j.state, j.updatedAt, j.seq, j.step, j.endReason ?? null, j.notice ?? null, j.id);
  }

  async getJob(id: string): Promise<JobRecord | null> {
    const row = this.sql('SELECT * FROM jobs WHERE id = ?').get(id) as JobRow | undefined;
    return row ? toJob(row) : null;
  }

  async listJobs(): Promise<JobRecord[]> {
    return (this.sql('SELECT * FROM jobs ORDER BY created_at, id').all() as JobRow[]).map(toJob);
  }

  async saveRound(r: RoundRecord): Promise<void> {
    this
      .sql('INSERT OR REPLACE INTO rounds (job_id, round_id, seq, mode, members, outcome, started_at, ended_at, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)')
      .run(r.jobId, r.roundId, r.seq, r.mode, JSON.stringify(r.members), r.outcome, r.startedAt, r.endedAt, r.detail);
  }

  async listRounds(jobId: string): Promise<RoundRecord[]> {
    return (this.sql('SELECT * FROM rounds WHERE job_id = ? ORDER BY round_id').all(jobId) as RoundRow[]).map(toRound);
  }

  async addMetric(jobId: string, p: MetricPoint): Promise<void> {
    this
      .sql(`INSERT INTO metrics (job_id, seq, kind, step, time, loss, accuracy, samples_per_sec, bytes_sent, workers, vouchers) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (job_id, seq, kind) DO UPDATE SET step = excluded.step, time = excluded.time, loss = excluded.loss, accuracy = excluded.accuracy,
        samples_per_sec = excluded.samples_per_sec, bytes_sent = excluded.bytes_sent, workers = excluded.workers, vouchers = excluded.vouchers`)
      .run(jobId, p.seq, metricKind(p), p.step, p.time, p.loss, p.accuracy, p.samplesPerSec, p.bytesSent, p.workers, p.vouchers ?? null);
  }

  async metricsPage(jobId: string, cursor: number, limit: number): Promise<{ points: MetricPoint[]; next: number | null }> {
    const rows = this.sql('SELECT rowid AS r, * FROM metrics WHERE job_id = ? AND rowid > ? ORDER BY rowid LIMIT ?').all(jobId, cursor, limit) as (MetricRow & { r: number })[];
    return { points: rows.map(toMetric), next: rows.length < limit ? null : rows[rows.length - 1].r };
  }

  async metrics(jobId: string, limit: number): Promise<MetricPoint[]> {
    const rows = this.sql('SELECT * FROM (SELECT rowid AS r, * FROM metrics WHERE job_id = ? ORDER BY rowid DESC LIMIT ?) ORDER BY r').all(jobId, limit) as MetricRow[];
    return rows.map(toMetric);
  }

  async putCheckpoint(jobId: string, info: CheckpointInfo, data: Uint8Array): Promise<void> {
    const dir = join(this.checkpointDir, jobId);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const path = join(dir, `${info.seq}.safetensors`);
    await writeDurably(path, data);
    this
      .sql('INSERT OR REPLACE INTO checkpoints (job_id, seq, step, bytes, sha256, created_at, path) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(jobId, info.seq, info.step, info.bytes, info.sha256, info.createdAt, path);
    await this.prune(jobId);
  }

  /** The file is synced and renamed into place (same file system: both under the data directory), then indexed. */
  async putCheckpointFile(jobId: string, info: CheckpointInfo, file: string): Promise<void> {
    const dir = join(this.checkpointDir, jobId);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const path = join(dir, `${info.seq}.safetensors`);
    const part = await open(file, 'r+');
    try {
      await part.sync();
    } finally {
      await part.close();
    }
    await rename(file, path);
    await syncDirectory(dir);
    this
      .sql('INSERT OR REPLACE INTO checkpoints (job_id, seq, step, bytes, sha256, created_at, path) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(jobId, info.seq, info.step, info.bytes, info.sha256, info.createdAt, path);
    await this.prune(jobId);
  }

  async checkpointFile(jobId: string, seq: number): Promise<{ path: string; info: CheckpointInfo } | null> {
    const row = this.sql('SELECT * FROM checkpoints WHERE job_id = ? AND seq = ?').get(jobId, seq) as CheckpointRow | undefined;
    return row && existsSync(row.path) ? { path: row.path, info: toCheckpoint(row) } : null;
  }

  /** Deletes the checkpoints the retention rule no longer keeps: the index row first, then the file. */
  private async prune(jobId: string): Promise<void> {
    const rows = this.sql('SELECT seq, path FROM checkpoints WHERE job_id = ?').all(jobId) as { seq: number; path: string }[];
    const drop = new Set(checkpointsToPrune(rows.map((r) => r.seq), this.retention));
    for (const r of rows) {
      if (!drop.has(r.seq)) continue;
      this.sql('DELETE FROM checkpoints WHERE job_id = ? AND seq = ?').run(jobId, r.seq);
      await rm(r.path, { force: true });
    }
  }

  async latestCheckpoint(jobId: string): Promise<CheckpointInfo | null> {
    const row = this.sql('SELECT * FROM checkpoints WHERE job_id = ? ORDER BY seq DESC LIMIT 1').get(jobId) as CheckpointRow | undefined;
    return row ? toCheckpoint(row) : null;
  }

  async readCheckpoint(jobId: string, seq: number): Promise<Uint8Array | null> {
    const row = this.sql('SELECT path, sha256 FROM checkpoints WHERE job_id = ? AND seq = ?').get(jobId, seq) as { path: string; sha256: string } | undefined;
    if (!row) return null;
    const data = await readFile(row.path).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return null;
      throw e;
    });
    return data && verifiedCheckpoint(jobId, seq, data, row.sha256);
  }

  async latestAccuracy(jobId: string): Promise<number | null> {
    const row = this.sql('SELECT accuracy FROM metrics WHERE job_id = ? AND accuracy IS NOT NULL ORDER BY seq DESC, rowid DESC LIMIT 1').get(jobId) as { accuracy: number } | undefined;
    return row?.accuracy ?? null;
  }

  async saveContributors(records: ContributorRecord[]): Promise<void> {
    const st = this.sql(`INSERT OR REPLACE INTO contributors (job_id, client_id, volunteer_id, adapter, backend, step, bytes_sent, bytes_received, samples, syncs,
      compute_ms, first_at, last_at, left_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    this.db.transaction(() => {
      for (const c of records) {
        st.run(c.jobId, c.clientId, c.volunteerId, c.adapter, c.backend, c.step, c.bytesSent, c.bytesReceived, c.samples, c.syncs, c.computeMs, c.firstAt, c.lastAt, c.leftReason);
      }
    })();
  }

  async contributors(jobId: string): Promise<ContributorRecord[]> {
    return (this.sql('SELECT * FROM contributors WHERE job_id = ? ORDER BY first_at, client_id').all(jobId) as ContributorRow[]).map(toContributor);
  }

  async volunteerCredit(clientId: string): Promise<VolunteerCredit | null> {
    const t = this.sql('SELECT COUNT(*) AS jobs, SUM(samples) AS samples, SUM(syncs) AS syncs, SUM(compute_ms) AS compute FROM contributors WHERE client_id = ?').get(clientId) as
      { jobs: number; samples: number | null; syncs: number | null; compute: number | null };
    const name = (await this.displayNames([clientId])).get(clientId) ?? null;
    if (t.jobs === 0 && name === null) return null;
    return { displayName: name, jobs: t.jobs, samples: t.samples ?? 0, syncs: t.syncs ?? 0, computeMs: t.compute ?? 0 };
  }

  async displayNames(clientIds: string[]): Promise<Map<string, string>> {
    const names = new Map<string, string>();
    const st = this.sql('SELECT display_name FROM volunteers WHERE client_id = ?');
    for (const id of new Set(clientIds)) {
      const row = st.get(id) as { display_name: string } | undefined;
      if (row) names.set(id, row.display_name);
    }
    return names;
  }

  async setDisplayName(clientId: string, name: string | null): Promise<void> {
    if (name === null) return void this.sql('DELETE FROM volunteers WHERE client_id = ?').run(clientId);
    // A replaced row gets a new rowid: rowid order is the order names were last set.
    this.sql('INSERT OR REPLACE INTO volunteers (client_id, display_name) VALUES (?, ?)').run(clientId, name);
    this.sql(`DELETE FROM volunteers WHERE rowid IN (SELECT v.rowid FROM volunteers v
      WHERE NOT EXISTS (SELECT 1 FROM contributors c WHERE c.client_id = v.client_id AND c.syncs > 0) ORDER BY v.rowid DESC LIMIT -1 OFFSET ?)`).run(this.maxUnprovenNames);
  }

  async reputations(clientIds: string[]): Promise<Map<string, ReputationRecord>> {
    const out = new Map<string, ReputationRecord>();
    const st = this.sql('SELECT * FROM reputation WHERE client_id = ?');
    for (const id of new Set(clientIds)) {
      const row = st.get(id) as { client_id: string; verified: number; verified_since_fault: number; faults: number; last_fault: string | null; last_fault_at: number | null } | undefined;
      if (!row) continue;
      out.set(id, {
        clientId: row.client_id, verified: row.verified, verifiedSinceFault: row.verified_since_fault, faults: row.faults,
        lastFault: row.last_fault, lastFaultAt: row.last_fault_at,
      });
    }
    return out;
  }

  async addReputation(clientId: string, change: ReputationChange): Promise<void> {
    const faults = change.fault ? 1 : 0;
    const verified = change.verified ?? 0;
    this.sql(`INSERT INTO reputation (client_id, verified, verified_since_fault, faults, last_fault, last_fault_at) VALUES (?, ?, ?, ?, ?, ?)
      ON CONFLICT (client_id) DO UPDATE SET verified = verified + excluded.verified, faults = faults + excluded.faults,
      verified_since_fault = CASE WHEN excluded.faults > 0 THEN excluded.verified_since_fault ELSE verified_since_fault + excluded.verified_since_fault END,
      last_fault = COALESCE(excluded.last_fault, last_fault), last_fault_at = COALESCE(excluded.last_fault_at, last_fault_at)`)
      .run(clientId, verified, verified, faults, change.fault?.reason ?? null, change.fault?.at ?? null);
  }

  async penalties(jobId: string): Promise<PenaltyRecord[]> {
    return this.sql('SELECT kind, key, offences, until, reason FROM penalties WHERE job_id = ? ORDER BY rowid').all(jobId) as PenaltyRecord[];
  }

  async savePenalties(jobId: string, records: PenaltyRecord[]): Promise<void> {
    // The stored record stays where it is newer (newerPenalty in store.ts).
    const st = this.sql(`INSERT INTO penalties (job_id, kind, key, offences, until, reason) VALUES (?, ?, ?, ?, ?, ?)
      ON CONFLICT (job_id, kind, key) DO UPDATE SET offences = excluded.offences, until = excluded.until, reason = excluded.reason
      WHERE excluded.offences > offences OR (excluded.offences = offences AND excluded.until >= until)`);
    this.db.transaction(() => {
      for (const r of records) st.run(jobId, r.kind, r.key, r.offences, r.until, r.reason);
    })();
  }

  async getSetting(key: string): Promise<string | null> {
    const row = this.sql('SELECT value FROM settings WHERE key = ?').get(key) as { value: string } | undefined;
    return row?.value ?? null;
  }

  async setSetting(key: string, value: string): Promise<void> {
    this.sql('INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)').run(key, value);
  }

  async digest(): Promise<string> {
    const h = createHash('sha256');
    for (const table of ['jobs', 'rounds', 'metrics', 'checkpoints', 'settings', 'contributors', 'volunteers', 'reputation', 'penalties']) {
      h.update(table);
      h.update(JSON.stringify(this.db.prepare(`SELECT * FROM ${table} ORDER BY rowid`).all()));
    }
    return h.digest('hex');
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
