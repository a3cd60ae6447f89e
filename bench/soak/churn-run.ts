// One churn rate of the soak: a fresh server process and data directory, one job, simulated
// volunteers joining and leaving after every commit, a SIGKILL of the server halfway and a restart
// on the same port and data directory, then the checks of analyze.ts over what was stored and seen.
// The volunteers exchange through @tabfleet/collective on its in-memory network
// (collective-exchanger.ts): every round's result is what the Ring or Group op gave each member.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { checksumOf, mulberry32 } from '@tabfleet/protocol';
import { freePort, SimVolunteer, waitFor } from '@tabfleet/server/testing';
import { Child } from '../coordinator/child';
import { CollectiveExchanger, type CollectiveExchangeCounters } from './collective-exchanger';
import { analyzeSoak, type CommitSeen, type LoadSeen, type Restart, type SoakAnalysis } from './analyze';
import type { SoakConfig } from './config';
import type { FromSoakServer, SoakServerArgs, ToSoakServer } from './messages';

type ServerChild = Child<ToSoakServer, FromSoakServer>;

/** A volunteer of the run and how much of what it saw was already collected. */
interface Tracked {
  sim: SimVolunteer;
  committedRead: number;
  loadsRead: number;
  /** The last sync it applied in this epoch (-1: none yet). */
  heldSeq: number;
  heldEpoch: number;
  /**
   * The epoch of the server its socket is connected to: set when it (re)connects. A commit the killed
   * server sent before it died can be read here after the next server started; it is that server's.
   */
  socketEpoch: number;
}

export interface Incarnation {
  pid: number;
  /** Server RSS after a forced GC once `warmupRounds` syncs were committed in this process. */
  rssAfterWarmupMb: number | null;
  /** The same at the end of this process (just before the kill, or at the end of the run). */
  rssEndMb: number | null;
  growthMb: number | null;
}

export interface ChurnReport {
  churn: number;
  seed: number;
  durationS: number;
  restarts: Restart[];
  joins: number;
  leaves: number;
  /** Volunteers the server ended (evicted); they are replaced like leavers. */
  evicted: number;
  refusedJoins: number;
  /** Churn events asked for per commit, over all commits (the realised churn rate). */
  churnEventsPerMember: number;
  analysis: SoakAnalysis | null;
  final: { members: number; inLastSync: number; distinctChecksums: number; seq: number };
  incarnations: Incarnation[];
  rssStartMb: number | null;
  rssEndMb: number | null;
  rssGrowthMb: number | null;
  serverLog: { evictions: number; orphanRollbacks: number; checkpointsLost: number; memberDisagreements: number; sample: string[] };
  simErrors: number;
  /** The exchange through the collective: its ops and failures, the network's frames, and the commits volunteers saw by where their result came from. */
  collective: CollectiveExchangeCounters & {
    network: { delivered: number; dropped: number };
    /** Commits a volunteer applied whose result its own Ring or Group op gave it, and others (star rounds through the server). */
    commitsThroughCollective: number;
    commitsOtherwise: number;
  };
  failure: string | null;
}

const MB = 2 ** 20;
const round1 = (x: number) => Math.round(x * 10) / 10;

export async function runChurn(cfg: SoakConfig, churn: number, seed: number, log: (line: string) => void): Promise<ChurnReport> {
  const t0 = Date.now();
  const rng = mulberry32(seed);
  const dataDir = mkdtempSync(join(os.tmpdir(), 'tabfleet-soak-'));
  const serverLog = join(dataDir, 'server.log');
  const token = randomBytes(16).toString('hex');
  const port = await freePort();
  const serverArgs: SoakServerArgs = { port, dataDir, token, timing: cfg.timing };
  const startChild = async () => {
    const child: ServerChild = new Child<ToSoakServer, FromSoakServer>('soak server', '../soak/server-process.ts', [JSON.stringify(serverArgs)], ['--expose-gc'], serverLog);
    const ready = await child.next('ready', 60_000);
    return { child, url: ready.url, pid: ready.pid };
  };
  const rssMb = async (child: ServerChild) => {
    child.send({ type: 'stats' });
    return round1((await child.next('stats', 30_000)).rssBytes / MB);
  };

  let { child: server, url, pid } = await startChild();
  const api = async (path: string, init: RequestInit & { json?: unknown } = {}) => {
    const res = await fetch(`${url}${path}`, {
      ...init, headers: { authorization: `Bearer ${token}`, ...(init.json === undefined ? {} : { 'content-type': 'application/json' }) },
      body: init.json === undefined ? undefined : JSON.stringify(init.json),
    });
    if (!res.ok) throw new Error(`${init.method ?? 'GET'} ${path}: HTTP ${res.status} ${await res.text()}`);
    return res.json();
  };
  const jobId: string = (await api('/api/jobs', { method: 'POST', json: cfg.job })).job.id;

  const exchanger = new CollectiveExchanger({ seed });
  let commitsThroughCollective = 0, commitsOtherwise = 0;
  const live = new Set<Tracked>();
  const commits: CommitSeen[] = [];
  const loads: LoadSeen[] = [];
  const restarts: Restart[] = [];
  const incarnations: Incarnation[] = [{ pid, rssAfterWarmupMb: null, rssEndMb: null, growthMb: null }];
  let epoch = 0;
  /** The newest sync any volunteer saw committed in this epoch. */
  let latestSeq = 0;
  let restarting = false;
  let joins = 0, leaves = 0, evicted = 0, refusedJoins = 0, simErrors = 0, churnEvents = 0, memberCommits = 0;
  let churnTimers: NodeJS.Timeout[] = [];
  let failure: string | null = null;

  const collectLoads = (t: Tracked) => {
    for (; t.loadsRead < t.sim.loadedFrom.length; t.loadsRead++) loads.push({ epoch, seq: t.sim.loadedFrom[t.loadsRead].seq, checksum: t.sim.loadedFrom[t.loadsRead].checksum });
  };
  const close = (t: Tracked) => {
    collectLoads(t);
    simErrors += t.sim.errors.length;
    live.delete(t);
    t.sim.close();
  };
  const addVolunteer = async () => {
    joins++;
    const sim = new SimVolunteer({ url, exchanger, reconnect: true, trainMs: cfg.trainMs, appliedKept: 2, eventsKept: 256 });
    const t: Tracked = { sim, committedRead: 0, loadsRead: 0, heldSeq: -1, heldEpoch: -1, socketEpoch: epoch };
    sim.socket.on('connect', () => (t.socketEpoch = epoch));
    // Registered after the volunteer's own handler, which has applied the round by now.
    sim.socket.on('round:commit', (c: { roundId: number; seq: number }) => {
      if (sim.committed.length > t.committedRead) {
        t.committedRead = sim.committed.length;
        // Labelled with the epoch of the server that sent it, not the one running when it was read.
        // (Read after the restart, a commit of the killed server counted as unknown to the new one,
        // four times in a suite beside a CPU hog.)
        commits.push({ epoch: t.socketEpoch, roundId: c.roundId, seq: c.seq, checksum: checksumOf(sim.params) });
        if (exchanger.completed(sim.volunteerId, c.roundId)) commitsThroughCollective++;
        else commitsOtherwise++;
        t.heldSeq = c.seq;
        t.heldEpoch = t.socketEpoch;
      }
      if (t.socketEpoch !== epoch) return; // the killed server's: not progress of the running one
      if (c.seq > latestSeq) lastCommitAt = Date.now();
      latestSeq = Math.max(latestSeq, c.seq);
    });
    live.add(t);
    try {
      await sim.connected();
      const ack = await sim.request(jobId);
      if (!ack.ok) {
        refusedJoins++;
        if (refusedJoins <= 3 || refusedJoins % 50 === 0) log(`  join refused (${refusedJoins} so far): ${ack.error.code} ${ack.error.message}`);
        if (live.has(t)) close(t);
      }
    } catch (e) {
      // A volunteer that left (was closed) while joining is churn, not a refusal.
      if (!live.has(t)) return;
      refusedJoins++;
      log(`  join failed: ${(e as Error).message}`);
      close(t);
    }
  };
  /**
   * Applied the latest sync of this epoch. (Not `baseSeq`: right after a restart a volunteer that has
   * not reloaded yet still holds the old process's sync of the same number.) Admitted joiners that
   * have not committed yet are not counted, so the guard errs towards keeping volunteers.
   */
  const holds = (t: Tracked) => t.heldEpoch === epoch && t.heldSeq === latestSeq;
  const churnEvent = () => {
    const size = live.size;
    let leave = size >= cfg.maxMembers ? true : size <= cfg.minMembers ? false : rng() < 0.5;
    // Never the departure that would leave fewer than `minHolders` holding the latest model: with
    // none left the job goes back to its checkpoint by design, which is not what this run measures.
    const holders = [...live].filter(holds).length;
    const candidates = [...live].filter((t) => !holds(t) || holders - 1 >= cfg.minHolders);
    if (leave && candidates.length === 0) leave = false;
    if (leave) {
      leaves++;
      close(candidates[Math.floor(rng() * candidates.length)]);
    } else {
      void addVolunteer();
    }
  };
  /**
   * A volunteer the server ended (evicted) has left the job: it is closed and counted, and while the
   * job is short of volunteers new ones are asked in, at most once a second (a keep-out may refuse them).
   * Churn is driven by commits, so a job that churn left below its minimum would wait for ever: after
   * 2 s without a commit, volunteers are asked in too, as new ones would arrive in a real job.
   */
  let lastTopUp = 0;
  let lastCommitAt = Date.now();
  let starvedTopUps = 0;
  const retireEnded = () => {
    for (const t of [...live]) {
      if (t.sim.ended === null) continue;
      evicted++;
      log(`  volunteer ${t.sim.volunteerId} ended by the server: ${t.sim.ended}`);
      close(t);
    }
    if (restarting || Date.now() - lastTopUp <= 1_000) return;
    if (live.size < cfg.minMembers) {
      lastTopUp = Date.now();
      for (let i = live.size; i < cfg.minMembers; i++) void addVolunteer();
    } else if (Date.now() - lastCommitAt > 2_000 && live.size < cfg.maxMembers) {
      lastTopUp = Date.now();
      if (++starvedTopUps <= 3) log(`  no commit for ${Date.now() - lastCommitAt} ms: one more volunteer asked in`);
      void addVolunteer();
    }
  };
  const churnAfterCommit = () => {
    const n = Math.floor(churn * live.size + rng());
    churnEvents += n;
    memberCommits += live.size;
    for (let i = 0; i < n; i++) churnTimers.push(setTimeout(churnEvent, rng() * cfg.churnSpreadMs));
    if (churnTimers.length > 256) churnTimers = churnTimers.slice(-64);
  };
  const stopChurn = () => {
    for (const t of churnTimers) clearTimeout(t);
    churnTimers = [];
  };

  let analysis: SoakAnalysis | null = null;
  const final = { members: 0, inLastSync: 0, distinctChecksums: 0, seq: 0 };
  try {
    for (let i = 0; i < cfg.initialMembers; i++) await addVolunteer();
    const restartAt = Math.floor(cfg.rounds / 2);
    let handled = 0;
    let warmSeq = cfg.warmupRounds;
    const deadline = t0 + cfg.budgetPerRateMs;
    for (;;) {
      const seq = await waitFor(`a commit after sync ${handled} (churn ${churn})`, () => {
        retireEnded();
        return latestSeq > handled ? latestSeq : 0;
      }, cfg.commitTimeoutMs, 5);
      handled = seq;
      for (const t of live) collectLoads(t);
      const inc = incarnations[incarnations.length - 1];
      if (inc.rssAfterWarmupMb === null && seq >= warmSeq) inc.rssAfterWarmupMb = await rssMb(server);
      if (restarts.length === 0 && seq >= restartAt) {
        // Kill the server between two commits, with churn still in flight.
        stopChurn();
        restarting = true;
        inc.rssEndMb = await rssMb(server);
        const killedAt = Date.now();
        server.kill();
        await server.stopped(5_000);
        epoch++;
        ({ child: server, url, pid } = await startChild());
        const resumedSeq: number = (await api(`/api/jobs/${jobId}`)).job.seq;
        restarts.push({ killedAt, resumedSeq });
        log(`  killed the server at sync ${seq}; the new one (pid ${pid}) resumed from sync ${resumedSeq}`);
        incarnations.push({ pid, rssAfterWarmupMb: null, rssEndMb: null, growthMb: null });
        latestSeq = handled = resumedSeq;
        restarting = false;
        warmSeq = resumedSeq + cfg.warmupRounds;
        continue;
      }
      if (restarts.length > 0 && seq >= cfg.rounds) break;
      if (Date.now() > deadline) throw new Error(`time budget of ${cfg.budgetPerRateMs} ms used up at sync ${seq}`);
      if (seq % 100 === 0) log(`  sync ${seq}: ${live.size} volunteers, ${joins} joins, ${leaves} leaves`);
      churnAfterCommit();
    }
  } catch (e) {
    failure = (e as Error).message;
    log(`  failed: ${failure}`);
  }
  stopChurn();
  try {
    // With churn stopped, every volunteer that stays ends in the same sync on the same parameters.
    if (!failure) {
      const inLastSync = (t: Tracked) => t.sim.committed.at(-1) === latestSeq && t.sim.baseSeq === latestSeq;
      await waitFor('every volunteer in the last sync', () => live.size > 0 && [...live].every(inLastSync), cfg.commitTimeoutMs, 10).catch((e: Error) => {
        failure = e.message;
      });
    }
    final.seq = latestSeq;
    final.members = live.size;
    const last = [...live].filter((t) => t.sim.committed.at(-1) === latestSeq);
    final.inLastSync = last.length;
    final.distinctChecksums = new Set(last.map((t) => checksumOf(t.sim.applied.get(latestSeq) ?? t.sim.params))).size;
    for (const t of live) collectLoads(t);
    const inc = incarnations[incarnations.length - 1];
    if (server.exited === null) {
      inc.rssEndMb = await rssMb(server);
      // The volunteers go first, so the tables read below hold every commit they saw.
      for (const t of [...live]) close(t);
      await new Promise((r) => setTimeout(r, 300));
      const rounds = (await api(`/api/jobs/${jobId}/rounds`)).rounds;
      const metrics = (await api(`/api/jobs/${jobId}/metrics`)).points;
      analysis = analyzeSoak({ rounds, restarts, commits, loads, metrics });
    }
  } catch (e) {
    failure ??= (e as Error).message;
  }
  for (const t of [...live]) close(t);
  server.kill();
  await server.stopped(5_000);

  for (const inc of incarnations) inc.growthMb = inc.rssAfterWarmupMb !== null && inc.rssEndMb !== null ? round1(inc.rssEndMb - inc.rssAfterWarmupMb) : null;
  const rssStartMb = incarnations[0].rssAfterWarmupMb;
  const rssEndMb = incarnations[incarnations.length - 1].rssEndMb;
  const growths = [rssStartMb !== null && rssEndMb !== null ? rssEndMb - rssStartMb : null, ...incarnations.map((i) => i.growthMb)].filter((x): x is number => x !== null);
  const logText = readFileSync(serverLog, 'utf8');
  const lines = logText.split('\n');
  const matching = (re: RegExp) => lines.filter((l) => re.test(l));
  const evictions = matching(/evicting /);
  // A failed run keeps its data directory (SQLite, checkpoints, server.log) for investigation.
  if (failure) log(`  kept ${dataDir} (server.log, SQLite) for investigation`);
  else rmSync(dataDir, { recursive: true, force: true });
  return {
    churn, seed, durationS: round1((Date.now() - t0) / 1000), restarts, joins, leaves, evicted, refusedJoins,
    churnEventsPerMember: memberCommits ? Math.round((churnEvents / memberCommits) * 1000) / 1000 : 0,
    analysis, final, incarnations, rssStartMb, rssEndMb, rssGrowthMb: growths.length ? round1(Math.max(...growths)) : null,
    serverLog: {
      evictions: evictions.length, orphanRollbacks: matching(/every member that held sync/).length, checkpointsLost: matching(/no checkpoint of sync/).length,
      memberDisagreements: matching(/members disagree/).length, sample: [...evictions, ...matching(/every member that held sync|members disagree/)].slice(0, 8).map((l) => l.slice(0, 300)),
    },
    simErrors,
    collective: {
      ...exchanger.counters, network: { delivered: exchanger.net.counters.delivered, dropped: exchanger.net.counters.dropped }, commitsThroughCollective, commitsOtherwise,
    },
    failure,
  };
}
