// `npm run bench -- soak [--quick]`: a soak test of the round clock under churn. For each churn rate
// p (5%, 20%, 50%): a fresh server process (bench/soak/server-process.ts: `startServer()` with short
// round timings, a free port, a fresh data directory), one job, and simulated volunteers
// (`@tabfleet/server/testing`, real Socket.IO clients in this process, `reconnect: true`) that exchange
// through @tabfleet/collective over its in-memory network (soak/collective-exchanger.ts: a Group
// average by per-part owners for this untrusted job, a Ring allreduce for a trusted one; the op code a
// tab runs over WebRTC, its typed failures reported with round:failed). After every
// commit, round(p × volunteers) of them (stochastic rounding) leave (socket closed) or new ones join,
// each at a random moment within 20 ms, so some land mid-round. Halfway through, the server process is
// killed with SIGKILL and started again on the same port and data directory; the volunteers reconnect
// by themselves. The run ends when the job's history holds `rounds` syncs; then churn stops and the
// volunteers that stay must all end in the same sync with the same parameters.
//
// Files: soak/config.ts (settings), soak/churn-run.ts (one churn rate), soak/analyze.ts (the checks,
// unit-tested with planted faults in soak/analyze.test.ts), soak/server-process.ts (the server),
// soak/collective-exchanger.ts (the volunteers' exchange, tested in collective-exchanger.test.ts).
// Writes bench/results/soak.json (soak.quick.json with --quick); see DEFINITIONS for every figure.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { randomInt } from 'node:crypto';
import { runRecord } from './machine';
import type { BenchOptions } from './run';
import { runChurn, type ChurnReport } from './soak/churn-run';
import { soakConfig } from './soak/config';

const repoRoot = resolve(import.meta.dirname, '..');

export const DEFINITIONS = {
  epoch: 'the life of one server process; a round belongs to the epoch in which it began (rounds table startedAt against the kill time)',
  rounds:
    'syncs in the job\'s final history (finalSeq): the last sync of the unbroken chain 1..N committed by the last epoch, after the restart\'s re-done ' +
    'syncs. summary.rounds is the minimum over churn rates',
  rounds_through_collective:
    'syncs of the final history whose committing round was a ring or group round (each member\'s result from its own Ring allreduce or Group average over ' +
    'the in-memory network), not a star round through the server; history_by_mode splits all of them by mode. summary: the minimum over churn rates',
  committed_rounds: 'rows of the rounds table with outcome committed, re-done ones included',
  rolled_back: 'syncs committed before a kill and after the checkpoint the next process resumed from (resumed_from): the restart discarded them',
  redone_syncs:
    'of the rolled-back syncs, those the next process committed again (each counted once): a sync committed before the kill and again after the restart ' +
    'because the restart resumed from an earlier checkpoint. Re-done by design, so neither lost nor duplicated. summary: the sum over churn rates',
  collective:
    'the volunteers\' exchange (bench/soak/collective-exchanger.ts, one shared MemoryNetwork per churn rate): exchanges begun, completed, failed by the ' +
    'code the volunteer reported (aborted ones, the server\'s round:abort or a lost server connection, are not reported), group validations, frames and ' +
    'bytes the members\' rings and groups sent (and dropped as stale, duplicate or foreign), frames the network delivered and dropped (in flight when a ' +
    'link or peer died), and the commits volunteers applied by whether their own collective op gave the result (commitsThroughCollective) or not ' +
    '(commitsOtherwise: star rounds). framesBeforeRouter: frames that reached a volunteer\'s transport before its first ring or group made the ' +
    'transport\'s FrameRouter (made lazily, as runtime.ts makes it), so nobody routed them and they were lost; a joiner\'s first round then stalls ' +
    'to its deadline (failures.deadline; a deadline sample names members that never began)',
  lost_syncs:
    'syncs missing from the history: within an epoch, a committed sequence number that jumps past the next one expected counts every skipped sync; a ' +
    'process that resumes past the last sync the previous one committed counts the syncs in between',
  duplicated_syncs: 'commits of a sync that its epoch had already committed (committed twice with no restart between); every such extra commit counts once',
  checksum_disagreements:
    'committed rounds (per epoch and round id) where the volunteers that applied it hold parameters with different checksums, or a checksum other than the ' +
    'one the server stored for the round (or the server stored a mismatch); summed with the final check (1 when the volunteers staying at the end hold more ' +
    'than one checksum for the last sync)',
  load_mismatches:
    'checkpoint loads (model:load of sync s > 0) whose loaded parameters differ from the checksum of the commit of s in the history the loading epoch knows ' +
    '(its own commit of s, or the earlier epoch\'s at or before the sync it resumed from)',
  metric_rows:
    'sync metric rows (bytesSent set) per sync of the history: sync_missing counts syncs 1..N without one, sync_extra rows beyond one per sync (or for ' +
    'syncs outside 1..N); eval_extra the same for evaluation rows',
  churn:
    'after each commit the orchestrator draws floor(p × volunteers + U[0,1)) churn events; each is a leave (close a random volunteer) or a join (a new ' +
    'volunteer asks for the job) with probability 1/2, a join when at most min_members remain and a leave at max_members. A leave is never chosen that ' +
    'would leave fewer than min_holders volunteers holding the latest model (with none left the job returns to its checkpoint by design). realised_churn is ' +
    'events ÷ volunteers, summed over commits',
  rss:
    'the server process\'s resident set size after a forced full GC (--expose-gc), in MiB: start = the first process after warm_up_rounds syncs, end = the ' +
    'last process at the end of the run; per process likewise. rss_growth_mb is the largest of (end − start) and each process\'s own growth, over churn ' +
    'rates',
  server_log: 'lines of the server log: members evicted, orphan rollbacks (every holder left), checkpoints lost, members disagreeing on a commit',
};

function fuzzSummary(): Record<string, unknown> | null {
  const file = join(repoRoot, 'bench', 'results', 'fuzz.json');
  if (!existsSync(file)) return null;
  const f = JSON.parse(readFileSync(file, 'utf8'));
  const entries = Object.entries(f.decoders as Record<string, { cases: number; properties: number; failed: number }>);
  const decoders = Object.fromEntries(entries.map(([name, d]) => [name, { cases: d.cases, properties: d.properties, failed: d.failed }]));
  return {
    source: 'bench/results/fuzz.json (npm run fuzz)', fast_check: f.fast_check, seed: f.seed, seconds_budget: f.seconds_budget, duration_s: f.duration_s,
    cases: f.summary.cases, failed: f.summary.failed, decoders,
  };
}

function perRate(r: ChurnReport) {
  const a = r.analysis;
  return {
    churn: r.churn, seed: r.seed, duration_s: r.durationS, failure: r.failure,
    rounds: a?.finalSeq ?? null, committed_rounds: a?.committedRounds ?? null, aborted_rounds: a?.abortedRounds ?? null,
    rounds_through_collective: a === null ? null : (a.historyByMode.ring ?? 0) + (a.historyByMode.group ?? 0), history_by_mode: a?.historyByMode ?? null,
    restarts: r.restarts.length, resumed_from: r.restarts.map((x) => x.resumedSeq), rolled_back: a?.rolledBack ?? null, redone_syncs: a?.redone ?? null,
    lost: a?.lost ?? null, duplicated: a?.duplicated ?? null,
    checksum_disagreements: a === null ? null : a.checksumDisagreements + (r.final.distinctChecksums > 1 ? 1 : 0),
    commits_seen: a?.commitsSeen ?? null, commits_unknown_to_server: a?.commitsUnknownToServer ?? null,
    loads_checked: a?.loadsChecked ?? null, load_mismatches: a?.loadMismatches ?? null,
    metric_rows: a?.metrics ?? null,
    epochs: a?.epochs ?? null,
    joins: r.joins, leaves: r.leaves, evicted: r.evicted, refused_joins: r.refusedJoins, realised_churn: r.churnEventsPerMember,
    final: r.final,
    rss_start_mb: r.rssStartMb, rss_end_mb: r.rssEndMb, rss_growth_mb: r.rssGrowthMb, server_processes: r.incarnations,
    server_log: r.serverLog, sim_errors: r.simErrors,
    collective: r.collective,
  };
}

type RateReport = ReturnType<typeof perRate>;

function summarize(rates: RateReport[]) {
  const sum = (f: (r: RateReport) => number | null) => (rates.some((r) => f(r) === null) ? null : rates.reduce((s, r) => s + (f(r) ?? 0), 0));
  const growth = rates.map((r) => r.rss_growth_mb);
  const least = (f: (r: RateReport) => number | null) => (rates.some((r) => f(r) === null) ? null : Math.min(...rates.map((r) => f(r)!)));
  return {
    rounds: least((r) => r.rounds),
    rounds_through_collective: least((r) => r.rounds_through_collective),
    lost_syncs: sum((r) => r.lost),
    duplicated_syncs: sum((r) => r.duplicated),
    redone_syncs: sum((r) => r.redone_syncs),
    checksum_disagreements: sum((r) => r.checksum_disagreements),
    rss_growth_mb: growth.some((g) => g === null) ? null : Math.max(...(growth as number[])),
    failures: rates.filter((r) => r.failure).length,
    goal: { rounds: 1000, rounds_through_collective: 1000, lost_syncs: 0, duplicated_syncs: 0, checksum_disagreements: 0, rss_growth_mb_below: 50 },
  };
}

export async function runSoakBench(opts: BenchOptions): Promise<{ file: string; report: Record<string, unknown> }> {
  const cfg = soakConfig(opts.quick);
  // TABFLEET_BENCH_SOAK_ROUNDS=200: another run length (for investigating; the JSON records it).
  if (process.env.TABFLEET_BENCH_SOAK_ROUNDS) cfg.rounds = Number(process.env.TABFLEET_BENCH_SOAK_ROUNDS);
  const file = opts.out ?? join(repoRoot, 'bench', 'results', opts.quick ? 'soak.quick.json' : 'soak.json');
  const t0 = Date.now();
  const log = (line: string) => console.log(`[soak] ${line}`);
  const rates: RateReport[] = [];
  // TABFLEET_BENCH_SOAK_RATES=0.2,0.5: only these churn rates (for investigating one).
  const only = process.env.TABFLEET_BENCH_SOAK_RATES?.split(',').map(Number);
  for (const churn of only ?? cfg.churnRates) {
    const seed = randomInt(2 ** 31);
    log(`churn ${churn * 100}%: ${cfg.rounds} syncs, kill and restart at ${Math.floor(cfg.rounds / 2)} (seed ${seed})`);
    const r = perRate(await runChurn(cfg, churn, seed, log));
    log(`  ${r.rounds} syncs (${r.rounds_through_collective} through the collective; ${r.committed_rounds} commits, ${r.aborted_rounds} aborted, ${r.redone_syncs} re-done)`
      + ` in ${r.duration_s} s; lost ${r.lost}, duplicated ${r.duplicated}, checksum disagreements ${r.checksum_disagreements};`
      + ` RSS ${r.rss_start_mb} → ${r.rss_end_mb} MiB${r.failure ? `; FAILED: ${r.failure.split('\n')[0]}` : ''}`);
    rates.push(r);
  }
  const record = runRecord(t0);
  const report = {
    benchmark: 'soak',
    quick: opts.quick,
    ...record,
    machine: { ...record.machine, note: 'The server process, the simulated volunteers and their in-memory network (this process) and other work share these cores.' },
    options: cfg,
    definitions: DEFINITIONS,
    churn_rates: rates,
    fuzz: fuzzSummary(),
    summary: summarize(rates),
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  const s = report.summary;
  log(`summary: rounds ${s.rounds} (goal ≥ 1000; ${s.rounds_through_collective} through the collective), lost ${s.lost_syncs}, duplicated ${s.duplicated_syncs},`
    + ` re-done ${s.redone_syncs}, checksum disagreements ${s.checksum_disagreements}, RSS growth ${s.rss_growth_mb} MiB (goal < 50), failures ${s.failures}`);
  log(`wrote ${relative(process.cwd(), file) || file}`);
  return { file, report };
}

export async function run(opts: BenchOptions): Promise<void> {
  await runSoakBench(opts);
}
