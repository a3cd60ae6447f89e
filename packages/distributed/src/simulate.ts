// Runs N workers of one job in this thread over an in-memory network (tests, the convergence and
// byzantine benchmarks): each sync every worker does its local work, the payloads go through real
// Ring (or Group) collectives on MemoryTransports (with whatever link faults or caps the network has),
// every member prepares the result, the checksums are compared, and all commit. A `tamper` hook may
// replace what members send (attackers): they stay real workers that train and adopt the result.
// Grouped runs (Moshpit) average in small groups that change every sync, with members that may leave.
import { Group, MemoryNetwork, Ring, type MemoryTransport } from '@tabfleet/collective';
import { cutSteps, moshpitGroups, nextPace, pacedStepCeiling, type Aggregation } from '@tabfleet/protocol';
import type { ModelEngine } from './engine';
import { exchange, groupExchange, scalePayload } from './exchange';
import { attackerMajorities, commonStart, randomGroups, robustGroupedExchange } from './robust-groups';
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
  /** Grouped runs: this sync's groups (worker ids) and the attempts each took (2: a member left, the rest re-ran). */
  groups?: string[][];
  /** Grouped runs given `attackers`: how many of this sync's groups the attackers held a strict majority in. */
  attackerMajorityGroups?: number;
  groupAttempts?: number[];
  /** With `consensus`: max over members of ‖θᵢ − θ̄‖ / ‖θ̄‖ after the sync (θ̄: the members' mean). */
  consensus?: number;
  /** Workers taking part (grouped runs lose departed ones). */
  ids: string[];
}

/**
 * Moshpit averaging (protocol's moshpit.ts): each sync, members average inside groups of at most
 * `size` that change every sync, so members' models differ between groups and meet the global mean
 * through the rotation. LocalSGD only: members exchange their parameters (not deltas from bases that
 * differ across groups), and each adopts its group's mean. With a robust `group` rule (untrusted
 * jobs) the groups are a fresh random split every sync (robust-groups.ts) and each runs the robust
 * group average; `tamper` is then called per group with the group's members only.
 */
export interface Grouping {
  size: number;
  seed?: number;
}

/**
 * Paced rounds (LocalSGD, DiLoCo), as the server and runtime run them: a sync's local work lasts
 * about `budgetMs` on every member. Member i is given max(1, min(maxSteps, ⌊budgetMs / its ms per
 * step⌋)) steps, its pace measured on its earlier syncs (the first sync: `firstSteps` each, default H,
 * for `firstBudgetMs` where given, to measure), and trains while at least half a step still fits the
 * budget, at most protocol's `pacedStepCeiling` of them (a trusted job's: its members are the researcher's own); the mean weighs each delta by the samples it took. A non-finite budget:
 * the given steps, exactly.
 */
export interface Pacing {
  budgetMs: number;
  maxSteps?: number;
  firstSteps?: number;
  /** The first sync's time box, as the server's unmeasuredWork gives it (none: `firstSteps` exactly). */
  firstBudgetMs?: number;
  /**
   * The run's mean steps per member still to go (read each sync). As the server cuts a job's last
   * syncs to its target: where a member's ceiling could pass it, members get no budget (each does
   * exactly its steps), scaled to this mean where theirs would pass it (protocol's cutSteps), so the
   * run ends on its samples, not past them.
   */
  stepsLeft?: number;
}

/**
 * Replaces the payloads (one per worker, in order; `ids` the members' ids in the same order) before
 * they go out: Byzantine members in tests and benchmarks. Robust grouped runs call it once per group.
 */
export type Tamper = (payloads: readonly Payload[], seq: number, ids?: readonly string[]) => Payload[] | Promise<Payload[]>;

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
  groups?: Grouping;
  /** Grouped runs: workers (ids) that leave during a sync; their group's ring fails at `deadlineMs` and re-runs without them, the other groups' rounds go on. */
  departures?: Record<number, string[]>;
  /** Grouped runs: the attackers' ids, to count the groups they hold a majority in (`attackerMajorityGroups`). */
  attackers?: readonly string[];
  /** Report the consensus distance after every sync (reads every member's parameters). */
  consensus?: boolean;
  /**
   * Called before each worker's local work, outside its timing. Benchmarks collect garbage here:
   * workers that share one process share its heap, so a collection that one worker's timing would
   * pay for holds every worker's garbage (the heterogeneous benchmark's MLP: 200-ms pauses, about
   * one per sync), where a volunteer's own tab collects only its own.
   */
  beforeLocal?: () => void;
}

export async function startWorkers(workers: SimWorker[]): Promise<void> {
  for (const w of workers) await w.strategy.reset();
}

/** Runs syncs until `syncs` are done or `onSync` says stop; returns the reports. */
export async function runSyncs(all: SimWorker[], net: MemoryNetwork, opts: RunOptions): Promise<SyncReport[]> {
  // Timed on the network's clock (a FakeClock in tests that model their workers' speeds).
  const clock = net.clock;
  let workers = all;
  const transportOf = (id: string) => net.endpointOf(id) ?? net.endpoint(id);
  const reports: SyncReport[] = [];
  if (opts.pace && opts.group) throw new Error('paced rounds weigh members in the ring\'s mean; robust group rules do not weigh members yet');
  if (opts.groups && (opts.pace || workers.some((w) => w.strategy.name !== 'localsgd'))) {
    throw new Error('grouped (Moshpit) runs average LocalSGD parameters: not paced, ddp or diloco');
  }
  if (opts.groups && opts.tamper && !opts.group) throw new Error('tampered grouped runs need a robust group rule (`group`): plain Moshpit rings trust their members');
  if (opts.departures && !opts.groups) throw new Error('departures are simulated in grouped runs');
  if (opts.departures && opts.group) throw new Error('departures are simulated in plain grouped runs, not robust ones');
  const robustGrouped = opts.groups && opts.group ? { ...opts.groups, reference: commonStart(workers.map((w) => w.strategy.replay!.committedParams())) } : null;
  const attackerIds = new Set(opts.attackers ?? []);
  // Each member's measured ms per local step (paced rounds).
  const msPerStep = new Map<string, number>();
  for (let seq = 1; seq <= opts.syncs; seq++) {
    // Groups are formed over the members at the sync's start; those leaving during it take no part.
    const formedOver = workers.map((w) => w.id);
    const leaving = new Set(opts.departures?.[seq] ?? []);
    workers = workers.filter((w) => !leaving.has(w.id));
    const ids = workers.map((w) => w.id);
    const transports = ids.map(transportOf);
    let loss = 0;
    const own: Payload[] = [];
    const localMs: number[] = [];
    let given = workers.map((w) => stepsOf(w, msPerStep.get(w.id) ?? null, opts.pace));
    const left = opts.pace?.stepsLeft;
    const cut = left !== undefined && pacedStepCeiling(Math.max(...given), 'trusted') >= left;
    if (cut) given = cutSteps(given, left);
    // Time-budgeted once a member's pace is known, or by the first sync's time box before: the given
    // steps become a ceiling (paced ddp's micro-batches make one batch: exactly those).
    const budgetOf = (i: number): number | undefined => {
      if (!opts.pace || cut || workers[i].strategy.name === 'ddp') return undefined;
      const budget = msPerStep.has(ids[i]) ? opts.pace.budgetMs : opts.pace.firstBudgetMs;
      return budget !== undefined && Number.isFinite(budget) ? budget : undefined;
    };
    const budgeted = (i: number) => budgetOf(i) !== undefined;
    const ceilings = given.map((n, i) => (budgeted(i) ? Math.min(opts.pace!.maxSteps ?? Infinity, pacedStepCeiling(n, 'trusted')) : n));
    const predictedLocalMs = opts.pace && workers.every((w) => msPerStep.has(w.id))
      ? ceilings.map((n, i) => Math.min(n * msPerStep.get(ids[i])!, budgetOf(i) ?? Infinity))
      : null;
    const steps: number[] = [];
    const samples: number[] = [];
    const stepsMs: number[] = [];
    for (const [i, w] of workers.entries()) {
      opts.beforeLocal?.();
      const t = clock.now();
      const work = await w.strategy.local(opts.pace ? ceilings[i] : undefined, budgetOf(i));
      // The pace is of the steps alone: the payload costs the same however many steps came before it.
      stepsMs.push(clock.now() - t);
      steps.push(budgeted(i) ? work.steps : given[i]);
      loss += work.loss / workers.length;
      samples.push(work.samples);
      own.push(await w.strategy.payload());
      localMs.push(clock.now() - t);
      msPerStep.set(w.id, nextPace(msPerStep.get(w.id) ?? null, stepsMs[i], steps[i]));
    }
    const tampered = opts.tamper && !robustGrouped ? await opts.tamper(own, seq, ids) : own;
    if (tampered.length !== workers.length) throw new Error(`tamper returned ${tampered.length} payloads for ${workers.length} workers`);
    // Weighted by samples when paced: member i sends N·w_i/W times its payload, so the mean is Σ w_i·x_i / W.
    const totalSamples = samples.reduce((a, b) => a + b, 0);
    const payloads = opts.pace ? tampered.map((p, i) => scalePayload(p, (workers.length * samples[i]) / totalSamples)) : tampered;
    const collectiveOpts = (i: number) => ({ transport: transports[i], members: ids, self: ids[i], jobId: opts.jobId ?? 'sim', round: seq, deadlineMs: opts.deadlineMs ?? 120_000 });
    const group = opts.group;
    const t0 = clock.now();
    let rings: (Ring | Group)[] = [];
    let results: { mean: Float32Array; refused: { member: string }[] }[];
    let grouped: GroupedExchange | null = null;
    if (robustGrouped) {
      const r = await robustGroupedExchange({
        ids, transports, payloads, bases: workers.map((w) => w.strategy.replay!.committedParams()), reference: robustGrouped.reference,
        groups: randomGroups(ids, seq, robustGrouped.size, robustGrouped.seed), combine: group!, tamper: opts.tamper, seq, jobId: opts.jobId ?? 'sim',
        deadlineMs: opts.deadlineMs ?? 120_000,
      });
      grouped = { means: r.means, groups: r.groups, attempts: r.groups.map(() => 1), bytesSent: r.bytesSent };
      results = r.means.map((mean) => ({ mean, refused: r.refused.map((member) => ({ member })) }));
    } else if (opts.groups) {
      grouped = await groupedExchange(workers, transports, payloads, formedOver, seq, opts.groups, opts);
      results = grouped.means.map((mean) => ({ mean, refused: [] }));
    } else {
      rings = ids.map((_, i) => (group ? new Group(collectiveOpts(i)) : new Ring(collectiveOpts(i))));
      results = await Promise.all(rings.map((r, i) => (r instanceof Group ? groupExchange(r, payloads[i], group!) : exchange(r as Ring, payloads[i]).then((mean) => ({ mean, refused: [] })))));
    }
    const exchangeMs = clock.now() - t0;
    const checksums: string[] = [];
    const applyMs: number[] = [];
    for (const [i, w] of workers.entries()) {
      const t = clock.now();
      checksums.push(await (grouped ? w.strategy.prepareParams!(results[i].mean) : w.strategy.prepare(results[i].mean)));
      applyMs.push(clock.now() - t);
    }
    // Every member of a group (of the job, ungrouped) adopts the same model.
    for (const g of grouped?.groups ?? [ids]) {
      const agreed = new Set(g.filter((id) => ids.includes(id)).map((id) => checksums[ids.indexOf(id)]));
      if (agreed.size > 1) throw new Error(`members disagree after sync ${seq}: ${[...agreed].join(', ')}`);
    }
    for (const [i, w] of workers.entries()) {
      const t = clock.now();
      await w.strategy.commit();
      await w.engine.settled();
      applyMs[i] += clock.now() - t;
    }
    const refused = [...new Set(results.flatMap((r) => r.refused.map((x) => x.member)))].sort();
    const report: SyncReport = {
      seq, step: workers[0].engine.step, loss, bytesSent: grouped?.bytesSent ?? rings.map((r) => r.counters.bytesOut), checksum: checksums[0], exchangeMs, localMs, applyMs,
      refused, steps, stepsMs, predictedLocalMs, ids,
      ...(grouped ? { groups: grouped.groups, groupAttempts: grouped.attempts } : {}),
      ...(grouped && opts.attackers ? { attackerMajorityGroups: attackerMajorities(grouped.groups, attackerIds) } : {}),
      ...(opts.consensus ? { consensus: await consensusDistance(workers) } : {}),
    };
    for (const r of rings) r.close();
    reports.push(report);
    if (await opts.onSync?.(report)) break;
  }
  return reports;
}

interface GroupedExchange {
  /** Per worker (in order): its group's mean parameters (what `prepareParams` takes). */
  means: Float32Array[];
  groups: string[][];
  attempts: number[];
  bytesSent: number[];
}

/**
 * One grouped sync: the Moshpit groups of this sync over `formedOver` (the members when it began);
 * every group runs its own ring over its members' parameters (base − delta), at once. A group with a
 * member that left fails at the deadline and re-runs with the rest; no other group waits for it.
 */
async function groupedExchange(
  workers: SimWorker[], transports: MemoryTransport[], payloads: Payload[], formedOver: string[], seq: number, grouping: Grouping, opts: RunOptions,
): Promise<GroupedExchange> {
  const index = new Map(workers.map((w, i) => [w.id, i]));
  const params = workers.map((w, i) => {
    const p = payloads[i];
    if (p.kind !== 'dense') throw new Error('grouped runs exchange dense parameters');
    const base = w.strategy.replay!.committedParams();
    return base.map((b, k) => b - p.values[k]);
  });
  const means: Float32Array[] = new Array(workers.length);
  const bytesSent = workers.map(() => 0);
  const groups = moshpitGroups(formedOver, seq - 1, grouping.size, grouping.seed);
  const attempts = await Promise.all(groups.map(async (members) => {
    for (let attempt = 1; ; attempt++) {
      const present = members.filter((id) => index.has(id));
      const ringMembers = attempt === 1 ? members : present;
      if (ringMembers.length === 1) {
        means[index.get(ringMembers[0])!] = params[index.get(ringMembers[0])!];
        return attempt;
      }
      const rings = present.map((id) => new Ring({
        transport: transports[index.get(id)!],
        members: ringMembers,
        self: id,
        jobId: opts.jobId ?? 'sim',
        round: seq * 16 + attempt,
        deadlineMs: opts.deadlineMs ?? 120_000,
      }));
      const outcomes = await Promise.allSettled(rings.map((r, k) => exchange(r, {
        kind: 'dense',
        dtype: payloads[index.get(present[k])!].dtype,
        values: params[index.get(present[k])!],
      })));
      rings.forEach((r, k) => (bytesSent[index.get(present[k])!] += r.counters.bytesOut));
      for (const r of rings) r.close();
      const failed = outcomes.find((o) => o.status === 'rejected');
      if (!failed) {
        outcomes.forEach((o, k) => (means[index.get(present[k])!] = (o as PromiseFulfilledResult<Float32Array>).value));
        return attempt;
      }
      if (attempt > 1 || present.length === members.length) throw (failed as PromiseRejectedResult).reason;
    }
  }));
  return { means, groups, attempts, bytesSent };
}

/** max over members of ‖θᵢ − θ̄‖ / ‖θ̄‖, θ̄ the members' mean parameters. */
async function consensusDistance(workers: SimWorker[]): Promise<number> {
  const all = await Promise.all(workers.map((w) => w.engine.readParams()));
  const mean = new Float32Array(all[0].length);
  for (const p of all) for (let k = 0; k < mean.length; k++) mean[k] += p[k] / all.length;
  const norm = Math.sqrt(mean.reduce((a, v) => a + v * v, 0));
  return Math.max(...all.map((p) => Math.sqrt(p.reduce((a, v, k) => a + (v - mean[k]) ** 2, 0)) / norm));
}

/** Local steps of one member this sync: H, or what fits its pace in the budget (`firstSteps` until it has one). */
function stepsOf(w: SimWorker, msPerStep: number | null, pace: Pacing | undefined): number {
  const H = w.strategy.stepsPerSync;
  if (!pace) return H;
  if (msPerStep === null) return pace.firstSteps ?? H;
  return Math.max(1, Math.min(pace.maxSteps ?? Infinity, Math.floor(pace.budgetMs / msPerStep)));
}
