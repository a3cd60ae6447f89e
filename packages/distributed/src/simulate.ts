// Runs N workers of one job in this thread over an in-memory network (tests, the convergence and
// byzantine benchmarks): each sync every worker does its local work, the payloads go through real
// Ring (or Group) collectives on MemoryTransports (with whatever link faults or caps the network has),
// every member prepares the result, the checksums are compared, and all commit. A `tamper` hook may
// replace what members send (attackers): they stay real workers that train and adopt the result.
import { Group, MemoryNetwork, Ring } from '@tabfleet/collective';
import type { Aggregation } from '@tabfleet/protocol';
import type { ModelEngine } from './engine';
import { exchange, groupExchange } from './exchange';
import type { Payload, SyncStrategy } from './strategies';

export interface SimWorker {
  id: string;
  engine: ModelEngine;
  strategy: SyncStrategy;
}

export interface SyncReport {
  seq: number;
  /** Optimizer steps per worker so far. */
  step: number;
  loss: number;
  /** Bytes each worker sent in this sync (ring frames, headers included). */
  bytesSent: number[];
  checksum: string;
  exchangeMs: number;
  /**
   * Each worker's own compute in this sync: its local work and payload, and its prepare and commit.
   * The workers run one after another on one device here, so this is what each would take on its own
   * (volunteers each have their own GPU): benchmarks model a sync's time as max(local) + exchange + max(apply).
   */
  localMs: number[];
  applyMs: number[];
  /** Members whose contribution some part's owner refused (group averaging; a ring refuses nothing), sorted. */
  refused: string[];
}

/** Replaces the payloads (one per worker, in order) before they go out: Byzantine members in tests and benchmarks. */
export type Tamper = (payloads: readonly Payload[], seq: number) => Payload[] | Promise<Payload[]>;

export interface RunOptions {
  jobId?: string;
  syncs: number;
  /** Called after each committed sync; return true to stop early. */
  onSync?: (r: SyncReport) => boolean | void | Promise<boolean | void>;
  deadlineMs?: number;
  /** Average in a group by this robust rule (an untrusted job) instead of the ring's mean. */
  group?: { rule: Aggregation; trimFraction?: number };
  /**
   * Called with every worker's own payload after the local work; what it returns is what each worker
   * sends. The workers keep their own (a re-run would resend it), and all adopt the result.
   */
  tamper?: Tamper;
}

export async function startWorkers(workers: SimWorker[]): Promise<void> {
  for (const w of workers) await w.strategy.reset();
}

/** Runs syncs until `syncs` are done or `onSync` says stop; returns the reports. */
export async function runSyncs(workers: SimWorker[], net: MemoryNetwork, opts: RunOptions): Promise<SyncReport[]> {
  const ids = workers.map((w) => w.id);
  const transports = ids.map((id) => net.endpointOf(id) ?? net.endpoint(id));
  const reports: SyncReport[] = [];
  for (let seq = 1; seq <= opts.syncs; seq++) {
    let loss = 0;
    const own: Payload[] = [];
    const localMs: number[] = [];
    for (const w of workers) {
      const t = performance.now();
      loss += (await w.strategy.local()).loss / workers.length;
      own.push(await w.strategy.payload());
      localMs.push(performance.now() - t);
    }
    const payloads = opts.tamper ? await opts.tamper(own, seq) : own;
    if (payloads.length !== workers.length) throw new Error(`tamper returned ${payloads.length} payloads for ${workers.length} workers`);
    const collectiveOpts = (i: number) => ({ transport: transports[i], members: ids, self: ids[i], jobId: opts.jobId ?? 'sim', round: seq, deadlineMs: opts.deadlineMs ?? 120_000 });
    const group = opts.group;
    const rings = ids.map((_, i) => (group ? new Group(collectiveOpts(i)) : new Ring(collectiveOpts(i))));
    const t0 = performance.now();
    const results = await Promise.all(rings.map((r, i) => (r instanceof Group ? groupExchange(r, payloads[i], group!) : exchange(r as Ring, payloads[i]).then((mean) => ({ mean, refused: [] })))));
    const exchangeMs = performance.now() - t0;
    const checksums: string[] = [];
    const applyMs: number[] = [];
    for (const [i, w] of workers.entries()) {
      const t = performance.now();
      checksums.push(await w.strategy.prepare(results[i].mean));
      applyMs.push(performance.now() - t);
    }
    if (new Set(checksums).size !== 1) throw new Error(`members disagree after sync ${seq}: ${checksums.join(', ')}`);
    for (const [i, w] of workers.entries()) {
      const t = performance.now();
      await w.strategy.commit();
      applyMs[i] += performance.now() - t;
    }
    const refused = [...new Set(results.flatMap((r) => r.refused.map((x) => x.member)))].sort();
    const report = { seq, step: workers[0].engine.step, loss, bytesSent: rings.map((r) => r.counters.bytesOut), checksum: checksums[0], exchangeMs, localMs, applyMs, refused };
    for (const r of rings) r.close();
    reports.push(report);
    if (await opts.onSync?.(report)) break;
  }
  return reports;
}
