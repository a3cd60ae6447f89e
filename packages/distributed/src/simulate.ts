// Runs N workers of one job in this thread over an in-memory network (tests, the convergence and
// byzantine benchmarks): each sync every worker does its local work, the payloads go through real
// Ring (or Group) collectives on MemoryTransports (with whatever link faults or caps the network has),
// every member prepares the result, the checksums are compared, and all commit. A `tamper` hook may
// replace what members send (attackers): they stay real workers that train and adopt the result.
import { Group, MemoryNetwork, Ring } from '@tabfleet/collective';
import type { Aggregation } from '@tabfleet/protocol';
import type { ModelEngine } from './engine';
import { exchange, groupExchange, scalePayload } from './exchange';
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
  /** Local steps each worker did in this sync (H for all, unless paced), and their time alone (localMs less the payload). */
  steps: number[];
  stepsMs: number[];
  /** What the pace predicted each worker's local steps would take (paced syncs after the first; else null). */
  predictedLocalMs: number[] | null;
}

/**
 * Paced rounds (LocalSGD, DiLoCo): a sync's local work lasts about `budgetMs` on every member. Member
 * i does max(1, min(maxSteps, ⌊budgetMs / its ms per step⌋)) steps, its pace measured on its earlier
 * syncs (the first sync: H steps each, to measure), and the mean weighs each delta by its samples.
 */
export interface Pacing {
  budgetMs: number;
  maxSteps?: number;
}

/** Weight of the newest measurement in a member's pace. */
const PACE_SMOOTHING = 0.5;

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
  pace?: Pacing;
}

export async function startWorkers(workers: SimWorker[]): Promise<void> {
  for (const w of workers) await w.strategy.reset();
}

/** Runs syncs until `syncs` are done or `onSync` says stop; returns the reports. */
export async function runSyncs(workers: SimWorker[], net: MemoryNetwork, opts: RunOptions): Promise<SyncReport[]> {
  const ids = workers.map((w) => w.id);
  const transports = ids.map((id) => net.endpointOf(id) ?? net.endpoint(id));
  const reports: SyncReport[] = [];
  if (opts.pace && opts.group) throw new Error('paced rounds weigh members in the ring\'s mean; robust group rules do not weigh members yet');
  // Each member's measured ms per local step (paced rounds).
  const msPerStep: (number | null)[] = workers.map(() => null);
  for (let seq = 1; seq <= opts.syncs; seq++) {
    let loss = 0;
    const own: Payload[] = [];
    const localMs: number[] = [];
    const steps = workers.map((w, i) => stepsOf(w, msPerStep[i], opts.pace));
    const predictedLocalMs = opts.pace && msPerStep.every((m) => m !== null) ? steps.map((n, i) => n * msPerStep[i]!) : null;
    const samples: number[] = [];
    const stepsMs: number[] = [];
    for (const [i, w] of workers.entries()) {
      const t = performance.now();
      const work = await w.strategy.local(opts.pace ? steps[i] : undefined);
      // The pace is of the steps alone: the payload costs the same however many steps came before it.
      stepsMs.push(performance.now() - t);
      const measured = stepsMs[i] / steps[i];
      loss += work.loss / workers.length;
      samples.push(work.samples);
      own.push(await w.strategy.payload());
      localMs.push(performance.now() - t);
      msPerStep[i] = msPerStep[i] === null ? measured : PACE_SMOOTHING * measured + (1 - PACE_SMOOTHING) * msPerStep[i]!;
    }
    const tampered = opts.tamper ? await opts.tamper(own, seq) : own;
    if (tampered.length !== workers.length) throw new Error(`tamper returned ${tampered.length} payloads for ${workers.length} workers`);
    // Weighted by samples when paced: member i sends N·w_i/W times its payload, so the mean is Σ w_i·x_i / W.
    const totalSamples = samples.reduce((a, b) => a + b, 0);
    const payloads = opts.pace ? tampered.map((p, i) => scalePayload(p, (workers.length * samples[i]) / totalSamples)) : tampered;
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
    const report = { seq, step: workers[0].engine.step, loss, bytesSent: rings.map((r) => r.counters.bytesOut), checksum: checksums[0], exchangeMs, localMs, applyMs, refused, steps, stepsMs, predictedLocalMs };
    for (const r of rings) r.close();
    reports.push(report);
    if (await opts.onSync?.(report)) break;
  }
  return reports;
}

/** Local steps of one member this sync: H, or what fits its pace in the budget (H until it has one). */
function stepsOf(w: SimWorker, msPerStep: number | null, pace: Pacing | undefined): number {
  const H = w.strategy.stepsPerSync;
  if (!pace || msPerStep === null) return H;
  return Math.max(1, Math.min(pace.maxSteps ?? Infinity, Math.floor(pace.budgetMs / msPerStep)));
}
