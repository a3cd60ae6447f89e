// `npm run bench -- allreduce`: ring allreduce between headless Chromium tabs on loopback (WebRTC
// data channels, e2e/pages/collective.html), N = 2, 4, 8 and 1–64 MiB, fp32 and fp16 on the wire,
// next to the raw per-link throughput of the same data channels with all N ring links streaming at
// once. Raw and allreduce runs alternate (raw, allreduce, raw, allreduce, … `runs` pairs per cell),
// because the raw figure drifts between runs as much as the ratio being measured. Writes
// bench/results/allreduce.json. Every figure is measured here.
//
//   time         slowest tab's end − earliest tab's start of one allreduce (wall clock, every tab starts at a barrier)
//   algbw        S / time, S = the fp32 vector's bytes (also for fp16: the logical size)
//   busbw        algbw · 2(N−1)/N — what each link carried per second if it moved fp32
//   busbw_sent   bytes a member actually put on the wire (frames, headers; fp16 halves the payload) / time
//   raw          bytes / (ack from the receiver − start) per link, all links at once; median over links
//   busbw/raw    median busbw over the cell's runs ÷ median raw over its raw runs, with the min, max and
//                quartiles of the per-pair ratios (each allreduce over the raw run just before it)
// MB = 10⁶ bytes; sizes are MiB.
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, relative } from 'node:path';
import { repoRoot, browserSession, CHROMIUM_ARGS, CHROMIUM_PATH } from '@tabfleet/headless';
import type { RawResult, TimedRun } from '@tabfleet/collective/testing';
import { openCollectiveTabs, type CollectiveTabs } from '@tabfleet/headless/collective-tabs';
import { benchCommand, runRecord } from './machine';
import type { BenchOptions } from './run';
import { median, percentile } from './stats';

const MiB = 1024 * 1024;

export interface AllreduceBenchConfig {
  members: number[];
  sizesMiB: number[];
  dtypes: ('f32' | 'f16')[];
  /** Raw + allreduce pairs per (N, size, dtype). */
  runs: number;
  /** Bytes each link streams per raw measurement. */
  rawBytes: number;
}

export function allreduceBenchConfig(runs: number, quick: boolean): AllreduceBenchConfig {
  return quick
    ? { members: [2, 4], sizesMiB: [1], dtypes: ['f32', 'f16'], runs: 3, rawBytes: 2 * MiB }
    : { members: [2, 4, 8], sizesMiB: [1, 4, 16, 64], dtypes: ['f32', 'f16'], runs: Math.max(3, runs), rawBytes: 16 * MiB };
}

export interface Spread {
  min: number;
  q1: number;
  median: number;
  q3: number;
  max: number;
}

export interface AllreduceFigures {
  members: number;
  sizeMiB: number;
  bytes: number;
  dtype: 'f32' | 'f16';
  /** Bytes each member put on the wire per run (frames, headers included). */
  wireBytesPerMember: number;
  runsMs: number[];
  medianMs: number;
  algbw_MBps: number;
  busbw_MBps: number;
  /** wireBytesPerMember / medianMs: busbw on the bytes actually sent (half the payload for fp16). */
  busbw_sent_MBps: number;
  /** Per pair, the raw run just before the allreduce run: median over links, MB/s, and every link's. */
  rawRunsMBps: number[];
  rawLinksMBps: number[][];
  raw_MBps: number;
  /** busbw_MBps ÷ raw_MBps (a ratio of medians). */
  busbw_over_raw: number;
  /** Per pair: that run's busbw ÷ the raw run just before it; and their spread. */
  pairRatios: number[];
  busbw_over_raw_spread: Spread;
  /** busbw_sent_MBps ÷ raw_MBps: how much of the links' capacity the allreduce used, whatever the dtype. */
  wire_over_raw: number;
}

async function measureRaw(fleet: CollectiveTabs, bytes: number, tag: number): Promise<{ MBps: number; links: number[] }> {
  const rs: RawResult[] = await Promise.all(fleet.tabs.map(({ page }) => page.evaluate((o) => window.tabfleetCollective.raw(o), { bytes, tag })));
  const links = rs.map((r) => bytes / 1e6 / ((r.ackAt - r.sendStart) / 1000));
  return { MBps: median(links), links };
}

/** One timed allreduce on every tab at once: its time (slowest end − earliest start) and the wire bytes per member. */
async function timedAllreduce(fleet: CollectiveTabs, o: { bytes: number; dtype: 'f32' | 'f16'; seed: number }, where: string): Promise<{ ms: number; wireBytes: number }> {
  const bytesOut = () => Promise.all(fleet.tabs.map(({ page }) => page.evaluate(() => window.tabfleetCollective.stats().ring.bytesOut)));
  const before = await bytesOut();
  const all = await Promise.all(fleet.tabs.map(({ page }) => page.evaluate((x) => window.tabfleetCollective.allreduceTimed(x), { ...o, runs: 1 })));
  const after = await bytesOut();
  if (new Set(all.map((a) => a.checksum)).size !== 1) throw new Error(`${where}: tabs ended with different results`);
  const runs: TimedRun[] = all.map((a) => a.runs[0]);
  return { ms: Math.max(...runs.map((x) => x.end)) - Math.min(...runs.map((x) => x.start)), wireBytes: median(after.map((a, i) => a - before[i])) };
}

/** Nearest-rank quartiles, so every figure is one of the ratios. */
export function spread(values: number[]): Spread {
  return { min: percentile(values, 0), q1: percentile(values, 25), median: median(values), q3: percentile(values, 75), max: percentile(values, 100) };
}

export async function runAllreduceBench(opts: BenchOptions) {
  const cfg = allreduceBenchConfig(opts.runs, opts.quick);
  const file = opts.out ?? join(repoRoot, 'bench', 'results', opts.quick ? 'allreduce.quick.json' : 'allreduce.json');
  const t0 = Date.now();
  console.log(`[allreduce] ${opts.quick ? 'quick mode, ' : ''}N = ${cfg.members.join(', ')}; sizes ${cfg.sizesMiB.join(', ')} MiB; ${cfg.runs} raw + allreduce pairs ` +
    `per cell; load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const session = await browserSession();
  const results: AllreduceFigures[] = [];
  const connectMs: Record<string, number> = {};
  let userAgent = '';
  try {
    for (const n of cfg.members) {
      const fleet = await openCollectiveTabs(session.browser, `${session.baseUrl}/e2e/pages/collective.html`, n, {
        jobId: 'bench-allreduce', round: n, deadlineMs: 10 * 60_000, log: (l) => /error|fail/i.test(l) && console.log(l),
      });
      try {
        userAgent ||= await fleet.tabs[0].page.evaluate(() => navigator.userAgent);
        const c = await Promise.all(fleet.tabs.map(({ page }) => page.evaluate(() => window.tabfleetCollective.connect())));
        connectMs[n] = Math.max(...c);
        let tag = 1;
        // Warm the channels (SCTP congestion window, JIT) before anything is timed.
        await measureRaw(fleet, Math.min(cfg.rawBytes, 4 * MiB), tag++);
        for (const sizeMiB of cfg.sizesMiB) {
          for (const dtype of cfg.dtypes) {
            const bytes = sizeMiB * MiB;
            const where = `N=${n} ${sizeMiB} MiB ${dtype}`;
            // One untimed run (JIT, buffers) for the small sizes; big runs are long enough on their own.
            if (sizeMiB <= 4) await timedAllreduce(fleet, { bytes, dtype, seed: sizeMiB }, where);
            const raws: { MBps: number; links: number[] }[] = [];
            const runs: { ms: number; wireBytes: number }[] = [];
            for (let i = 0; i < cfg.runs; i++) {
              raws.push(await measureRaw(fleet, cfg.rawBytes, tag++));
              runs.push(await timedAllreduce(fleet, { bytes, dtype, seed: sizeMiB }, where));
            }
            const f = cellFigures(n, sizeMiB, dtype, raws, runs);
            results.push(f);
            console.log(`[allreduce] ${where.padEnd(16)}: ${f.medianMs.toFixed(0)} ms, busbw ${f.busbw_MBps.toFixed(2)} MB/s (sent ${f.busbw_sent_MBps.toFixed(2)}), ` +
              `raw ${f.rawRunsMBps.map((x) => x.toFixed(2)).join('/')} MB/s → busbw/raw ${f.busbw_over_raw.toFixed(3)} (pairs ` +
              `${f.busbw_over_raw_spread.min.toFixed(3)}–${f.busbw_over_raw_spread.max.toFixed(3)})`);
          }
        }
        const errors = fleet.errors();
        if (errors.length) throw new Error(`a tab threw:\n${errors.join('\n')}`);
      } finally {
        await fleet.close();
      }
    }
    const report = buildReport(cfg, opts, results, connectMs, session.browser.version(), userAgent, t0);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
    const s = report.summary;
    console.log(`\n[allreduce] summary at N=4, ${s.sizeMiB} MiB: raw per link ${fmt(s.raw_MBps)} MB/s; busbw/raw fp32 ${fmt(s.busbw_over_raw_n4)} (pairs ` +
      `${fmt(s.busbw_over_raw_n4_spread?.min ?? null)}–${fmt(s.busbw_over_raw_n4_spread?.max ?? null)}), fp16 ${fmt(s.busbw_over_raw_n4_f16)} logical, ` +
      `${fmt(s.busbw_sent_over_raw_n4_f16)} on bytes sent (goal ≥ 0.9)`);
    console.log(`[allreduce] wrote ${relative(process.cwd(), file) || file}`);
    return { file, report };
  } finally {
    await session.close();
  }
}

function cellFigures(members: number, sizeMiB: number, dtype: 'f32' | 'f16', raws: { MBps: number; links: number[] }[], runs: { ms: number; wireBytes: number }[]): AllreduceFigures {
  const bytes = sizeMiB * MiB;
  const busFactor = (2 * (members - 1)) / members;
  const runsMs = runs.map((r) => r.ms);
  const medianMs = median(runsMs);
  const algbw = bytes / 1e6 / (medianMs / 1000);
  const wireBytesPerMember = median(runs.map((r) => r.wireBytes));
  const rawRunsMBps = raws.map((r) => r.MBps);
  const raw = median(rawRunsMBps);
  const pairRatios = runs.map((r, i) => ((bytes / 1e6 / (r.ms / 1000)) * busFactor) / rawRunsMBps[i]);
  const busbwSent = wireBytesPerMember / 1e6 / (medianMs / 1000);
  return {
    members, sizeMiB, bytes, dtype, wireBytesPerMember, runsMs, medianMs, algbw_MBps: algbw, busbw_MBps: algbw * busFactor, busbw_sent_MBps: busbwSent,
    rawRunsMBps, rawLinksMBps: raws.map((r) => r.links), raw_MBps: raw,
    busbw_over_raw: (algbw * busFactor) / raw, pairRatios, busbw_over_raw_spread: spread(pairRatios), wire_over_raw: busbwSent / raw,
  };
}

function fmt(x: number | null): string {
  return x === null ? 'n/a' : x.toFixed(3);
}

function buildReport(cfg: AllreduceBenchConfig, opts: BenchOptions, results: AllreduceFigures[], connectMs: Record<string, number>, browserVersion: string, userAgent: string, t0: number) {
  const sizeForSummary = cfg.sizesMiB.includes(16) ? 16 : cfg.sizesMiB[cfg.sizesMiB.length - 1];
  const pick = (dtype: 'f32' | 'f16') => results.find((r) => r.members === 4 && r.sizeMiB === sizeForSummary && r.dtype === dtype);
  const f32 = pick('f32'), f16 = pick('f16');
  return {
    benchmark: 'allreduce',
    ...runRecord(t0, benchCommand('allreduce', opts)),
    quick: opts.quick,
    options: cfg,
    browser: {
      name: 'chromium',
      version: browserVersion,
      launch: process.env.TABFLEET_BROWSER_WS ? { connectedTo: process.env.TABFLEET_BROWSER_WS } : { executable: CHROMIUM_PATH, args: CHROMIUM_ARGS },
      userAgent,
    },
    transport: {
      kind: 'simple-peer data channels (ordered, reliable), host ICE candidates on loopback, one tab per member',
      frameBytesMax: 65536,
      highWaterMarkBytes: 1024 * 1024,
    },
    definitions: {
      time: 'slowest tab end − earliest tab start of one allreduce, wall clock; tabs start at a barrier',
      algbw_MBps: 'S / time, S = fp32 vector bytes (logical size, also for fp16), MB = 1e6 bytes',
      busbw_MBps: 'algbw · 2(N−1)/N at the median time of the cell\'s runs',
      busbw_sent_MBps: 'bytes one member actually put on the wire in a run (ring frames, headers included; median over members and runs) / median time: for fp16 about half of busbw_MBps',
      raw_MBps: 'per link: bytes / (receiver ack − sender start), all N ring links streaming at once, median over links; a cell reports the median over its raw runs',
      interleaving: 'each cell runs `runs` pairs back to back in the same tabs: a raw measurement, then one timed allreduce (small sizes get one untimed allreduce first)',
      busbw_over_raw: 'median busbw ÷ median raw of the same cell (a ratio of medians); busbw_over_raw_spread: min, quartiles (nearest rank), max of the per-pair ' +
        'ratios, each run\'s busbw ÷ the raw run just before it',
      wire_over_raw: 'busbw_sent_MBps ÷ raw_MBps',
    },
    connectMs,
    results,
    summary: {
      /** Sizes the summary uses (16 MiB unless quick mode left it out). */
      sizeMiB: sizeForSummary,
      raw_MBps: f32?.raw_MBps ?? null,
      busbw_over_raw_n4: f32?.busbw_over_raw ?? null,
      busbw_over_raw_n4_spread: f32?.busbw_over_raw_spread ?? null,
      busbw_MBps_n4: f32?.busbw_MBps ?? null,
      /** fp16 at N = 4: busbw of the logical (fp32) size, and of the bytes actually sent, each over the cell's own raw. */
      busbw_MBps_n4_f16: f16?.busbw_MBps ?? null,
      busbw_sent_MBps_n4_f16: f16?.busbw_sent_MBps ?? null,
      busbw_over_raw_n4_f16: f16?.busbw_over_raw ?? null,
      busbw_sent_over_raw_n4_f16: f16?.wire_over_raw ?? null,
      /** Wire bytes/s per member ÷ raw at N = 4, fp32: how much of the links' capacity the allreduce used. */
      wire_over_raw_n4: f32?.wire_over_raw ?? null,
      goal_busbw_over_raw: 0.9,
    },
  };
}

export async function run(opts: BenchOptions): Promise<void> {
  await runAllreduceBench(opts);
}
