// The byzantine benchmark's `group_capture_rate` (issue 37 (b)): Sybils that rejoin under fresh
// identities and addresses to land together in one checked Moshpit group. A real server (networks
// per /32, so every Sybil address is a network of its own and no per-network cap holds it back), one
// untrusted job of `members` simulated volunteers in groups of `groupSize`, `attackerShare` of them
// attackers. After every sync an attacker whose group it and its fellows did not hold leaves at the
// barrier and joins again as a new volunteer: a new client id from a new loopback address (as far as
// the network prefix lets an attacker spread, here every address). Measured over the syncs' drawn
// groups: the share of group-syncs in which attackers held a majority (more than half), beside the
// rate random assignment gives the same sync's members (hypergeometric, per group) with its 95%
// interval, and the binomial rate of the table for p = attackerShare. The server draws groups
// from node:crypto every sync, so the rejoins buy nothing; they do cost the attackers syncs (a
// joiner sits out until it has loaded a model), which the per-sync expectation accounts for.
import { startTestServer, waitFor, type SimVolunteer, type TestServer } from '@tabfleet/server/testing';
import type { RoundBegin } from '@tabfleet/protocol';

export interface CaptureOptions {
  members: number;
  attackerShare: number;
  groupSize: number;
  /** Syncs to measure (each draws ⌈present / groupSize⌉ groups). */
  syncs: number;
  log?: (line: string) => void;
}

export interface CaptureResult {
  members: number;
  attackers: number;
  groupSize: number;
  syncs: number;
  /** Groups drawn over the measured syncs. */
  groupSyncs: number;
  /** Of them, groups where attackers were more than half, and half or more (which also breaks a median). */
  captured: number;
  halfOrMore: number;
  rate: number;
  /** What random assignment of each sync's present members gives: the expected share of captured groups. */
  randomRate: number;
  /** Half width of the 95% interval of the captured share under random assignment. */
  ci95: number;
  /** P(Binomial(groupSize, attackerShare) > groupSize / 2): the table. */
  binomialRate: number;
  /** Attackers and members in a measured sync's groups, on average (rejoiners sit out while they load). */
  meanAttackersPresent: number;
  meanMembersPresent: number;
  /** Times attackers left and joined again under a new identity and address. */
  rejoins: number;
  /** Whether the measured rate is within the random rate plus its interval. */
  withinRandom: boolean;
}

/**
 * Each member's training time per sync, as a volunteer takes some. (It was needed when a Moshpit job
 * sent a joiner only a checkpoint of the current sync, so rejoiners never got back in while syncs
 * outran checkpoint uploads; joiners now load the newest checkpoint: moshpit-joiner-load.test.ts.)
 */
const TRAIN_MS = 100;

/** How long the measurement waits for the next sync's groups before it gives up. */
const STALL_MS = 120_000;

/** A small model: the draw does not depend on it, and the simulated members' work grows with it. */
const SMALL_MODEL = { preset: 'gpt', gpt: { layers: 1, heads: 1, width: 8, context: 8 }, dataset: 'fortunes' } as const;

/** The round:begin of every group the server drew, by round id. */
type Drawn = Map<number, { seq: number; members: readonly string[] }>;

export async function measureGroupCapture(opts: CaptureOptions): Promise<CaptureResult> {
  const log = opts.log ?? (() => {});
  const attackers = Math.round(opts.members * opts.attackerShare);
  const server = await startTestServer({
    networkRules: { v4: 32, v6: 128 }, addressLimits: { connections: 100, jobShare: 0.5 },
    timing: { roundTimeoutMs: 60_000, barrierTimeoutMs: 60_000, loadTimeoutMs: 60_000 },
  });
  const drawn: Drawn = new Map();
  const attackerIds = new Set<string>();
  const sims: SimVolunteer[] = [];
  let nextAddress = 0;
  let rejoins = 0;
  let logged = 0;
  try {
    const job = await server.createJob({
      ...SMALL_MODEL, minWorkers: opts.members - attackers, maxWorkers: opts.members + attackers, H: 1, groupSize: opts.groupSize, pacing: 'fixed', targetSteps: 1_000_000, checkpointEvery: 1000,
    });
    const join = async (attacker: boolean): Promise<SimVolunteer> => {
      const s = await volunteerAt(server, nextAddress++, drawn);
      sims.push(s);
      if (attacker) {
        attackerIds.add(s.volunteerId);
        // It reports ready itself (below), so it can leave at the barrier instead.
        s.holdReady = true;
      }
      const ack = await s.request(job.id);
      if (!ack.ok) throw new Error(`join refused: ${ack.error.code} ${ack.error.message}`);
      return s;
    };
    // Attackers first (every address is a network of its own, so none is a majority), then the honest
    // members: the job starts with the last of them (minWorkers) and never waits for a rejoining attacker.
    let live: SimVolunteer[] = [];
    for (let i = 0; i < attackers; i++) live.push(await join(true));
    for (let i = 0; i < opts.members - attackers; i++) await join(false);
    const readyFor = new Map<SimVolunteer, number>();
    const measured = () => Math.max(0, ...[...drawn.values()].map((d) => d.seq));
    let last = { seq: 0, at: Date.now() };
    while (measured() <= opts.syncs) {
      if (measured() > last.seq) last = { seq: measured(), at: Date.now() };
      else if (Date.now() - last.at > STALL_MS) throw new Error(`capture: no sync drawn after sync ${last.seq} in ${STALL_MS / 1000} s\n${server.logTail(40)}`);
      const next: SimVolunteer[] = [];
      for (const s of live) {
        const loaded = s.loadedFrom.length > 0 && !s.ended;
        if (!loaded || readyFor.get(s) === s.baseSeq + 1) {
          next.push(s);
          continue;
        }
        const lastSeq = s.committed.at(-1);
        const group = lastSeq === s.baseSeq ? groupOf(drawn, s.volunteerId, lastSeq) : null;
        if (group && !heldBy(group, attackerIds)) {
          // Its group was not theirs: a fresh identity from a fresh address, for another draw.
          await s.emit('leave', { reason: 'rejoining' });
          s.close();
          rejoins++;
          next.push(await join(true));
          continue;
        }
        const ack = await s.emit('round:ready', { jobId: job.id, seq: s.baseSeq + 1, step: s.step });
        // Refused while it is not yet admitted (a joiner): it asks again on the next pass.
        if (ack.ok) readyFor.set(s, s.baseSeq + 1);
        next.push(s);
      }
      live = next;
      await new Promise((r) => setTimeout(r, 20));
      const seq = measured();
      if (seq > logged && seq % 25 === 0) log(`capture: sync ${(logged = seq)} of ${opts.syncs}, ${rejoins} rejoins`);
    }
    await waitFor('the last measured sync drawn', () => measured() > opts.syncs, 60_000);
  } finally {
    for (const s of sims) s.close();
    await server.stop();
  }
  return tally(drawn, attackerIds, opts, attackers, rejoins);
}

async function volunteerAt(server: TestServer, index: number, drawn: Drawn): Promise<SimVolunteer> {
  // 127.0.1.2 onwards: every volunteer, and every rejoin, from an address (a /32 network) of its own.
  const s = await server.volunteer({ localAddress: `127.0.${1 + Math.floor(index / 250)}.${2 + (index % 250)}`, appliedKept: 2, eventsKept: 200, trainMs: TRAIN_MS });
  s.socket.on('round:begin', (b: RoundBegin) => {
    if (b.mode === 'group' && b.grouped) drawn.set(b.roundId, { seq: b.seq, members: b.members });
  });
  await s.connected();
  return s;
}

function groupOf(drawn: Drawn, id: string, seq: number): readonly string[] | null {
  let found: readonly string[] | null = null;
  for (const [, d] of drawn) if (d.seq === seq && d.members.includes(id)) found = d.members;
  return found;
}

const heldBy = (group: readonly string[], attackers: ReadonlySet<string>) => group.filter((id) => attackers.has(id)).length * 2 > group.length;

function tally(drawn: Drawn, attackerIds: ReadonlySet<string>, opts: CaptureOptions, attackers: number, rejoins: number): CaptureResult {
  const bySeq = new Map<number, (readonly string[])[]>();
  for (const d of drawn.values()) if (d.seq >= 1 && d.seq <= opts.syncs) bySeq.set(d.seq, [...(bySeq.get(d.seq) ?? []), d.members]);
  let groupSyncs = 0, captured = 0, halfOrMore = 0, expected = 0, variance = 0, hostileSum = 0, presentSum = 0;
  for (const groups of bySeq.values()) {
    const present = new Set(groups.flat());
    const hostile = [...present].filter((id) => attackerIds.has(id)).length;
    hostileSum += hostile;
    presentSum += present.size;
    for (const g of groups) {
      const k = g.filter((id) => attackerIds.has(id)).length;
      groupSyncs++;
      if (k * 2 > g.length) captured++;
      if (k * 2 >= g.length) halfOrMore++;
      const p = hypergeometricAbove(present.size, hostile, g.length, Math.floor(g.length / 2) + 1);
      expected += p;
      variance += p * (1 - p);
    }
  }
  const rate = groupSyncs ? captured / groupSyncs : 0;
  const randomRate = groupSyncs ? expected / groupSyncs : 0;
  const ci95 = groupSyncs ? (1.96 * Math.sqrt(variance)) / groupSyncs : 0;
  const binomialRate = binomialAbove(opts.groupSize, opts.attackerShare, Math.floor(opts.groupSize / 2) + 1);
  return {
    members: opts.members, attackers, groupSize: opts.groupSize, syncs: bySeq.size, groupSyncs, captured, halfOrMore, rate, randomRate, ci95, binomialRate, rejoins,
    meanAttackersPresent: hostileSum / Math.max(1, bySeq.size), meanMembersPresent: presentSum / Math.max(1, bySeq.size),
    withinRandom: rate <= randomRate + ci95,
  };
}

function choose(n: number, k: number): number {
  if (k < 0 || k > n) return 0;
  let c = 1;
  for (let i = 1; i <= k; i++) c = (c * (n - k + i)) / i;
  return c;
}

/** P(X ≥ atLeast) for X the attackers among `draw` of `population` members, `hostile` of them attackers. */
export function hypergeometricAbove(population: number, hostile: number, draw: number, atLeast: number): number {
  let p = 0;
  for (let x = atLeast; x <= Math.min(draw, hostile); x++) p += (choose(hostile, x) * choose(population - hostile, draw - x)) / choose(population, draw);
  return p;
}

/** P(X ≥ atLeast) for X ~ Binomial(n, p). */
export function binomialAbove(n: number, p: number, atLeast: number): number {
  let sum = 0;
  for (let x = atLeast; x <= n; x++) sum += choose(n, x) * p ** x * (1 - p) ** (n - x);
  return sum;
}
