// `npm run bench -- lm-lab`: bigger models over thinner links on real capped links (issue 38). Four Node
// volunteers in four NATed homes of the network lab, each uplink capped at 10 Mbit/s and then 2 Mbit/s,
// train a GPT on fortunes by DDP, DiLoCo + DGC, DiLoCo + int8, DiLoCo + E2M1 and Streaming DiLoCo +
// E2M1, seeds interleaved, and one volunteer alone gives the curve at equal tokens
// (internet/lm-lab.ts). Summary keys and their thresholds are fixed here, before any run. `lm` (one
// page, a modeled clock) stays as it was; this is its measured counterpart.
// `--only mbit10,mbit2` runs those caps alone, into an earlier report where there is one.
import { existsSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { repoRoot } from '@tabfleet/headless';
import { DILOCO_TARGET_LOSS } from './internet/config';
import { LM_LAB_HOMES, NEW_VARIANTS, lmLabCells, runLmLabVariant, type LmLabCell, type LmLabPlan, type LmLabRun, type LmLabVariant } from './internet/lm-lab';
import { openVolunteerLab } from './internet/volunteer-lab';
import { benchCommand, commitOf, earlierReport, runRecord } from './machine';
import type { BenchOptions } from './run';

const FRAGMENTS = 2;

/** The issue's thresholds, fixed before any run. */
export const LM_LAB_TARGETS = {
  streaming_q4_loss_gap_vs_single: { atMost: 0.03 },
  bytes_to_target_vs_ddp: { atLeast: 1000 },
  peak_sync_bytes_ratio_streaming: { atLeast: 0.8 * FRAGMENTS },
  time_to_target_vs_ddp_10mbit: { atLeast: 10 },
  time_to_target_vs_diloco_dgc_2mbit: { atLeast: 1.5 },
} as const;

export function lmLabPlan(quick: boolean): LmLabPlan {
  return quick
    // A tiny GPT, one seed, a loose target: the path end to end, not a figure.
    ? { gpt: { layers: 1, heads: 2, width: 32, context: 32 }, batchSize: 4, lr: 3e-3, weightDecay: 0.01, H: 4, streaming: { H: 2, fragments: FRAGMENTS, overlapSteps: 1 },
      equalTokenSteps: 8, singleSteps: 32, maxSteps: 16, evalEverySteps: 8, seeds: [1], target: 5.3,
      targetRule: 'quick mode: a loose target (ln 256 = 5.55 is the untrained loss), not a figure', caps: [{ mbit: 10, variants: ['single', 'streaming-q4'] }] }
    // internet.json's DiLoCo plan (the lm benchmark's GPT, batch and AdamW, its H and target); Streaming
    // DiLoCo syncs every H/2 steps, so each fragment is synced every H, as DiLoCo's whole model is.
    : { gpt: { layers: 2, heads: 2, width: 64, context: 64 }, batchSize: 4, lr: 3e-3, weightDecay: 0.01, H: 16, streaming: { H: 8, fragments: FRAGMENTS, overlapSteps: 2 },
      equalTokenSteps: 128, singleSteps: 512, maxSteps: 320, evalEverySteps: 16, seeds: [1, 2, 3], target: DILOCO_TARGET_LOSS,
      targetRule: 'internet.json\'s DiLoCo target, fixed before its runs: lm.json\'s single worker (same GPT, batch 4, AdamW lr 3e-3; commit 05fa4f4), median over its 3 ' +
        'seeds of its validation loss after 131,072 tokens (2.826, 2.890, 2.944), rounded to 2.89; from neither variant measured here',
      caps: [
        { mbit: 10, variants: ['single', 'ddp', 'diloco-dgc', 'diloco-int8', 'diloco-q4', 'streaming-q4'] },
        // DDP behind 2 Mbit/s would take over ten minutes a run and no key reads it.
        { mbit: 2, variants: ['diloco-dgc', 'diloco-int8', 'streaming-q4'] },
      ] };
}

const DEFINITIONS = {
  msToTarget: 'server wall clock from the first round\'s begin to the first evaluation of the global model (the server\'s validation windows) at or below the target; '
    + 'a run that never reached it counts its whole time (a lower bound) and its cell says so in `reached`',
  bytesToTarget: 'what every member\'s collectives sent (frames with headers; the sync metric points) in the syncs up to that evaluation',
  peakSyncBytes: 'the most one member sent in one sync',
  lossAtEqualTokens: 'validation loss at 131,072 tokens seen in all: step 128 of four members, step 512 of the single volunteer',
  streaming_q4_loss_gap_vs_single: 'median over seeds of Streaming DiLoCo + E2M1\'s loss at equal tokens less the single volunteer\'s (10 Mbit/s lab)',
  bytes_to_target_vs_ddp: 'DDP\'s median bytes to the target over the best variant\'s (10 Mbit/s)',
  peak_sync_bytes_ratio_streaming: 'DiLoCo + E2M1\'s median peak bytes a sync over Streaming DiLoCo + E2M1\'s (the same wire format: the ratio is the fragments\' doing)',
  time_to_target_vs_ddp_10mbit: 'DDP\'s median time to the target over the fastest variant\'s, behind 10 Mbit/s uplinks',
  time_to_target_vs_diloco_dgc_2mbit: 'DiLoCo + DGC\'s median time to the target over the fastest new variant\'s (int8, E2M1, Streaming), behind 2 Mbit/s uplinks',
};

const r3 = (x: number) => Math.round(x * 1000) / 1000;

interface CapResult {
  mbit: number;
  lab: unknown;
  runs: LmLabRun[];
  failedRuns: { variant: LmLabVariant; seed: number; error: string }[];
  cells: Partial<Record<LmLabVariant, LmLabCell>>;
}

/** Every variant of one cap, seeds interleaved, in a lab of its own. */
async function measureCap(plan: LmLabPlan, cap: LmLabPlan['caps'][number], log: (l: string) => void): Promise<CapResult> {
  const lab = await openVolunteerLab({ homes: LM_LAB_HOMES, perHome: 1, uplinkMbit: cap.mbit, log });
  const runs: LmLabRun[] = [];
  const failedRuns: CapResult['failedRuns'] = [];
  try {
    for (const seed of plan.seeds) {
      for (const variant of cap.variants) {
        try {
          runs.push(await runLmLabVariant(lab, plan, variant, seed, cap.mbit, log));
        } catch (e) {
          failedRuns.push({ variant, seed, error: (e as Error).message.slice(0, 4000) });
          log(`lm-lab ${cap.mbit} Mbit/s ${variant} seed ${seed} failed: ${(e as Error).message.slice(0, 2000)}`);
        }
      }
    }
    return { mbit: cap.mbit, lab: lab.describe(), runs, failedRuns, cells: lmLabCells(runs) };
  } finally {
    await lab.close();
  }
}

/** The best of `variants` by `score` (higher is better) among those with a cell: its name and score, or null. */
function best(cells: CapResult['cells'], variants: readonly LmLabVariant[], score: (c: LmLabCell) => number): { variant: LmLabVariant; value: number } | null {
  const scored = variants.filter((v) => cells[v]).map((v) => ({ variant: v, value: score(cells[v]!) }));
  return scored.length ? scored.reduce((a, b) => (b.value > a.value ? b : a)) : null;
}

/** The summary keys from whichever caps ran; a key whose runs are missing is left out (and `met` says null). */
export function lmLabSummary(caps: Record<string, CapResult>) {
  const summary: Record<string, unknown> = {};
  const c10 = caps.mbit10?.cells ?? {};
  const c2 = caps.mbit2?.cells ?? {};
  const single = c10.single?.medianLossAtEqualTokens ?? null;
  const streamingLoss = c10['streaming-q4']?.medianLossAtEqualTokens ?? null;
  if (single !== null && streamingLoss !== null) summary.streaming_q4_loss_gap_vs_single = r3(streamingLoss - single);
  const ddp = c10.ddp;
  const others = ['diloco-dgc', ...NEW_VARIANTS] as LmLabVariant[];
  if (ddp) {
    const bytes = best(c10, others, (c) => ddp.medianBytesToTarget / c.medianBytesToTarget);
    if (bytes) Object.assign(summary, { bytes_to_target_vs_ddp: Math.round(bytes.value * 10) / 10, bytes_to_target_best_variant: bytes.variant });
    const time = best(c10, others, (c) => ddp.medianMs / c.medianMs);
    if (time) Object.assign(summary, { time_to_target_vs_ddp_10mbit: r3(time.value), time_to_target_best_variant_10mbit: time.variant });
  }
  if (c10['diloco-q4'] && c10['streaming-q4']) summary.peak_sync_bytes_ratio_streaming = r3(c10['diloco-q4'].medianPeakSyncBytes / c10['streaming-q4'].medianPeakSyncBytes);
  const dgc2 = c2['diloco-dgc'];
  if (dgc2) {
    const time = best(c2, NEW_VARIANTS, (c) => dgc2.medianMs / c.medianMs);
    if (time) Object.assign(summary, { time_to_target_vs_diloco_dgc_2mbit: r3(time.value), time_to_target_best_variant_2mbit: time.variant });
  }
  for (const [name, cap] of Object.entries(caps)) {
    summary[`seconds_to_target_${name}`] = Object.fromEntries(Object.entries(cap.cells).map(([v, c]) => [v, c!.msCounted.map((ms) => Math.round(ms / 100) / 10)]));
    summary[`reached_target_${name}`] = Object.fromEntries(Object.entries(cap.cells).map(([v, c]) => [v, c!.reached]));
  }
  const met = Object.fromEntries(Object.entries(LM_LAB_TARGETS).map(([key, t]) => {
    const value = summary[key];
    if (typeof value !== 'number') return [key, null];
    return [key, 'atLeast' in t ? value >= t.atLeast : value <= t.atMost];
  }));
  return { summary, met };
}

export async function run(opts: BenchOptions): Promise<void> {
  const file = opts.out ?? join(repoRoot, 'bench', 'results', opts.quick ? 'lm-lab.quick.json' : 'lm-lab.json');
  const plan = lmLabPlan(opts.quick);
  const sections = plan.caps.map((c) => `mbit${c.mbit}`);
  const unknown = (opts.only ?? []).filter((x) => !sections.includes(x));
  if (unknown.length) throw new Error(`--only: ${unknown.join(', ')}: lm-lab's sections are ${sections.join(', ')}`);
  // --only into an earlier report, or (none yet) a report of those caps alone.
  const earlier = opts.only && existsSync(file) ? earlierReport(file, opts, sections) : null;
  const t0 = Date.now();
  const log = (l: string) => console.log(`[lm-lab] ${l}`);
  log(`${opts.quick ? 'quick mode, ' : ''}seeds ${plan.seeds.join(', ')}, caps ${plan.caps.map((c) => `${c.mbit} Mbit/s: ${c.variants.join(', ')}`).join('; ')}; load average ` +
    `${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const caps: Record<string, CapResult> = { ...(earlier?.caps ?? {}) };
  const sectionCommits: Record<string, string | null> = { ...(earlier?.sectionCommits ?? {}) };
  const sectionDates: Record<string, string> = { ...(earlier?.sectionDates ?? {}) };
  for (const cap of plan.caps) {
    const name = `mbit${cap.mbit}`;
    if (opts.only && !opts.only.includes(name)) continue;
    caps[name] = await measureCap(plan, cap, log);
    sectionCommits[name] = commitOf();
    sectionDates[name] = new Date().toISOString();
  }
  const { summary, met } = lmLabSummary(caps);
  const report = {
    benchmark: 'lm-lab', ...runRecord(t0, benchCommand('lm-lab', opts)), quick: opts.quick, plan, homes: LM_LAB_HOMES, targets: LM_LAB_TARGETS,
    definitions: DEFINITIONS, sectionCommits, sectionDates, caps, summary, met,
  };
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  log(`summary: ${JSON.stringify(summary)}; met: ${JSON.stringify(met)}; wrote ${file}`);
}
