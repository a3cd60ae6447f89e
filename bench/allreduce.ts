// `npm run bench -- allreduce`: ring allreduce between headless Chromium tabs on loopback (WebRTC
// data channels, e2e/pages/collective.html), N = 2, 4, 8 and 1–64 MiB, fp32 and fp16 on the wire,
// next to the raw per-link throughput of the same data channels measured in the same run with all N
// ring links streaming at once. Writes bench/results/allreduce.json. Every figure is measured here.
//
//   time    slowest tab's end − earliest tab's start of one allreduce (wall clock, every tab starts at a barrier)
//   algbw   S / time, S = the fp32 vector's bytes (also for fp16: the logical size)
//   busbw   algbw · 2(N−1)/N — what each link carried per second if it moved fp32
//   raw     bytes / (ack from the receiver − start) per link, all links at once; median over links
// MB = 10⁶ bytes; sizes are MiB.
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, relative } from 'node:path';
import { repoRoot, browserSession, CHROMIUM_ARGS, CHROMIUM_PATH } from '@tabfleet/headless';
import { openCollectiveTabs, type CollectiveTabs } from '../e2e/collective-tabs';
import type { RawResult, TimedRun } from '../e2e/pages/collective-types';
import { machineInfo } from './machine';
import type { BenchOptions } from './run';
import { median } from './stats';

const MiB = 1024 * 1024;

export interface AllreduceBenchConfig {
  members: number[];
  sizesMiB: number[];
  dtypes: ('f32' | 'f16')[];
  runs: number;
  /** Bytes each link streams per raw measurement. */
  rawBytes: number;
  /** Raw measurements per N, half before the allreduce runs and half after. */
  rawRuns: number;
}

export function allreduceBenchConfig(runs: number, quick: boolean): AllreduceBenchConfig {
  return quick
    ? { members: [2, 4], sizesMiB: [1, 4], dtypes: ['f32', 'f16'], runs: 1, rawBytes: 4 * MiB, rawRuns: 2 }
    : { members: [2, 4, 8], sizesMiB: [1, 4, 16, 64], dtypes: ['f32', 'f16'], runs, rawBytes: 16 * MiB, rawRuns: Math.max(2, runs) };
}

export interface RawFigures {
  /** Per run: median over the N links of bytes / (ack − start), MB/s. */
  runsMBps: number[];
  /** Per run, every link's MB/s (tab i → tab i+1). */
  linksMBps: number[][];
  /** Median over runs: the per-link raw throughput. */
  MBps: number;
  bytesPerLink: number;
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
  /** busbw ÷ the raw per-link throughput of the same N. */
  busbw_over_raw: number;
  /** Wire bytes per member per second ÷ raw (how close to the links' capacity, whatever the dtype). */
  wire_over_raw: number;
}

async function measureRaw(fleet: CollectiveTabs, bytes: number, tag: number): Promise<{ MBps: number; links: number[] }> {
  const rs: RawResult[] = await Promise.all(fleet.tabs.map(({ page }) => page.evaluate((o) => window.tabfleetCollective.raw(o), { bytes, tag })));
  const links = rs.map((r) => bytes / 1e6 / ((r.ackAt - r.sendStart) / 1000));
  return { MBps: median(links), links };
}

export async function runAllreduceBench(opts: BenchOptions) {
  const cfg = allreduceBenchConfig(opts.runs, opts.quick);
  const file = opts.out ?? join(repoRoot, 'bench', 'results', opts.quick ? 'allreduce.quick.json' : 'allreduce.json');
  const t0 = Date.now();
  console.log(`[allreduce] ${opts.quick ? 'quick mode, ' : ''}N = ${cfg.members.join(', ')}; sizes ${cfg.sizesMiB.join(', ')} MiB; ${cfg.runs} runs; load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const session = await browserSession();
  const raw: Record<string, RawFigures> = {};
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
        const rawRuns: { MBps: number; links: number[] }[] = [];
        const rawHalf = Math.ceil(cfg.rawRuns / 2);
        // Warm the channels (SCTP congestion window, JIT) before anything is timed.
        await measureRaw(fleet, Math.min(cfg.rawBytes, 4 * MiB), tag++);
        for (let i = 0; i < rawHalf; i++) rawRuns.push(await measureRaw(fleet, cfg.rawBytes, tag++));
        console.log(`[allreduce] N=${n}: raw per link ${rawRuns.map((r) => r.MBps.toFixed(1)).join(', ')} MB/s`);
        const perN: Omit<AllreduceFigures, 'busbw_over_raw' | 'wire_over_raw'>[] = [];
        for (const sizeMiB of cfg.sizesMiB) {
          for (const dtype of cfg.dtypes) {
            const bytes = sizeMiB * MiB;
            const before = await Promise.all(fleet.tabs.map(({ page }) => page.evaluate(() => window.tabfleetCollective.stats().ring.bytesOut)));
            // One untimed warm-up run (JIT, buffers) for the small sizes, then the timed ones; big runs are long enough on their own.
            const warm = sizeMiB <= 4 ? 1 : 0;
            const all = await Promise.all(fleet.tabs.map(({ page }) => page.evaluate((o) => window.tabfleetCollective.allreduceTimed(o), { bytes, dtype, runs: cfg.runs + warm, seed: sizeMiB })));
            const after = await Promise.all(fleet.tabs.map(({ page }) => page.evaluate(() => window.tabfleetCollective.stats().ring.bytesOut)));
            if (new Set(all.map((a) => a.checksum)).size !== 1) throw new Error(`N=${n} ${sizeMiB} MiB ${dtype}: tabs ended with different results`);
            const runsMs: number[] = [];
            for (let r = warm; r < cfg.runs + warm; r++) {
              const runs: TimedRun[] = all.map((a) => a.runs[r]);
              runsMs.push(Math.max(...runs.map((x) => x.end)) - Math.min(...runs.map((x) => x.start)));
            }
            const medianMs = median(runsMs);
            const algbw = bytes / 1e6 / (medianMs / 1000);
            const wireBytesPerMember = median(after.map((a, i) => (a - before[i]) / (cfg.runs + warm)));
            perN.push({ members: n, sizeMiB, bytes, dtype, wireBytesPerMember, runsMs, medianMs, algbw_MBps: algbw, busbw_MBps: (algbw * 2 * (n - 1)) / n });
            console.log(`[allreduce] N=${n} ${String(sizeMiB).padStart(2)} MiB ${dtype}: ${medianMs.toFixed(0)} ms, algbw ${algbw.toFixed(2)} MB/s, busbw ${((algbw * 2 * (n - 1)) / n).toFixed(2)} MB/s`);
          }
        }
        for (let i = rawHalf; i < cfg.rawRuns; i++) rawRuns.push(await measureRaw(fleet, cfg.rawBytes, tag++));
        const rawFig: RawFigures = { runsMBps: rawRuns.map((r) => r.MBps), linksMBps: rawRuns.map((r) => r.links), MBps: median(rawRuns.map((r) => r.MBps)), bytesPerLink: cfg.rawBytes };
        raw[n] = rawFig;
        console.log(`[allreduce] N=${n}: raw per link (all runs) ${rawFig.runsMBps.map((x) => x.toFixed(1)).join(', ')} → median ${rawFig.MBps.toFixed(2)} MB/s`);
        for (const f of perN) {
          results.push({ ...f, busbw_over_raw: f.busbw_MBps / rawFig.MBps, wire_over_raw: f.wireBytesPerMember / 1e6 / (f.medianMs / 1000) / rawFig.MBps });
        }
        const errors = fleet.errors();
        if (errors.length) throw new Error(`a tab threw:\n${errors.join('\n')}`);
      } finally {
        await fleet.close();
      }
    }
    const report = buildReport(cfg, opts.quick, raw, results, connectMs, session.browser.version(), userAgent, Date.now() - t0);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
    const s = report.summary;
    console.log(`\n[allreduce] summary: raw per link (N=4) ${s.raw_MBps.toFixed(2)} MB/s; busbw/raw at N=4, ${s.sizeMiB} MiB: fp32 ${fmt(s.busbw_over_raw_n4)}, fp16 ${fmt(s.busbw_over_raw_n4_f16)} (goal ≥ 0.9)`);
    console.log(`[allreduce] wrote ${relative(process.cwd(), file) || file}`);
    return { file, report };
  } finally {
    await session.close();
  }
}

function fmt(x: number | null): string {
  return x === null ? 'n/a' : x.toFixed(3);
}

function buildReport(cfg: AllreduceBenchConfig, quick: boolean, raw: Record<string, RawFigures>, results: AllreduceFigures[], connectMs: Record<string, number>, browserVersion: string, userAgent: string, durationMs: number) {
  const sizeForSummary = cfg.sizesMiB.includes(16) ? 16 : cfg.sizesMiB[cfg.sizesMiB.length - 1];
  const pick = (dtype: 'f32' | 'f16') => results.find((r) => r.members === 4 && r.sizeMiB === sizeForSummary && r.dtype === dtype);
  return {
    benchmark: 'allreduce',
    createdAt: new Date().toISOString(),
    quick,
    options: cfg,
    machine: machineInfo(),
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
      busbw_MBps: 'algbw · 2(N−1)/N',
      raw_MBps: 'per link: bytes / (receiver ack − sender start), all N ring links streaming at once, median over links then runs',
    },
    connectMs,
    raw,
    results,
    summary: {
      /** Sizes the summary uses (16 MiB unless quick mode left it out). */
      sizeMiB: sizeForSummary,
      raw_MBps: raw[4]?.MBps ?? null,
      busbw_over_raw_n4: pick('f32')?.busbw_over_raw ?? null,
      busbw_over_raw_n4_f16: pick('f16')?.busbw_over_raw ?? null,
      busbw_MBps_n4: pick('f32')?.busbw_MBps ?? null,
      busbw_MBps_n4_f16: pick('f16')?.busbw_MBps ?? null,
      /** Wire bytes/s per member ÷ raw at N = 4, fp32: how much of the links' capacity the allreduce used. */
      wire_over_raw_n4: pick('f32')?.wire_over_raw ?? null,
      goal_busbw_over_raw: 0.9,
    },
    durationMs,
  };
}

export async function run(opts: BenchOptions): Promise<void> {
  await runAllreduceBench(opts);
}
