// `npm run bench -- lm-lab --quick` end to end (the network lab, the real server in a public host, Node
// volunteers in NATed homes behind 10 Mbit/s uplinks) into a temporary file: its run record, the plan,
// each run's figures consistent with its evaluations and the summary from the cells. Then the summary
// rules on made-up cells: each key from the runs it names, the best variant chosen, a missing cap
// leaving its keys out. Needs root (the lab). Speed lives in the JSON, not here.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runBench } from './child';
import { lmLabCells, lmLabFigures, type LmLabRun, type MetricRow } from './internet/lm-lab';
import { LM_LAB_TARGETS, lmLabPlan, lmLabSummary } from './lm-lab';
import { missingRecord } from './machine';

const dir = mkdtempSync(join(tmpdir(), 'tabfleet-bench-lm-lab-'));
after(() => rmSync(dir, { recursive: true, force: true }));

type Json = Record<string, any>;

test('npm run bench -- lm-lab --quick writes a complete lm-lab JSON', { timeout: 15 * 60_000 }, async (t) => {
  const out = join(dir, 'lm-lab.json');
  assert.equal(await runBench(['lm-lab', '--quick', '--out', out], t.signal), 0, 'the benchmark exits 0');
  const r: Json = JSON.parse(readFileSync(out, 'utf8'));
  assert.deepEqual(missingRecord(r), []);
  assert.equal(r.benchmark, 'lm-lab');
  assert.deepEqual(r.plan, lmLabPlan(true));
  assert.deepEqual(r.targets, LM_LAB_TARGETS);
  const cap = r.caps.mbit10;
  assert.deepEqual(cap.failedRuns, []);
  assert.deepEqual(cap.runs.map((x: Json) => x.variant), ['single', 'streaming-q4']);
  for (const run of cap.runs as LmLabRun[]) {
    assert.equal(run.reached, run.msToTarget !== null);
    const hit = run.evals.find((e) => e.loss <= r.plan.target);
    assert.equal(run.stepAtTarget, hit?.step ?? null);
    assert.equal(run.otherRounds.length, 0, `${run.variant}: every round a committed ring round`);
  }
  const [single, streaming] = cap.runs as LmLabRun[];
  assert.equal(single.syncs, r.plan.singleSteps, 'one volunteer: a one-member ring round a step');
  assert.ok(streaming.spec.fragments === 2 && streaming.spec.compression === 'e2m1');
  assert.ok(streaming.peakSyncBytes > 0 && streaming.bytesToTarget >= streaming.peakSyncBytes);
  assert.ok(streaming.uplinkBytesTotal > 0, 'the syncs crossed the homes\' uplinks');
  assert.deepEqual(r.summary, lmLabSummary(r.caps).summary);
  assert.equal(r.summary.streaming_q4_loss_gap_vs_single, Math.round((streaming.lossAtEqualTokens! - single.lossAtEqualTokens!) * 1000) / 1000);
});

test('the summary: each key from the cells it names, the best variant, nothing from a cap that did not run', () => {
  const plan = lmLabPlan(false);
  // Two syncs: every member sends half its peak in the first, its peak in the second.
  const run = (variant: LmLabRun['variant'], seed: number, ms: number, peak: number, loss: number): LmLabRun => {
    const points: MetricRow[] = [
      { seq: 1, step: 64, time: 1_000 + ms / 2, loss: 3, accuracy: null, bytesSent: peak * 2, workers: 4 },
      { seq: 2, step: 128, time: 1_000 + ms, loss: 3, accuracy: null, bytesSent: peak * 4, workers: 4 },
      { seq: 2, step: 128, time: 1_000 + ms, loss, accuracy: 0.3, bytesSent: null, workers: 4 },
    ];
    return lmLabFigures({ jobId: 'j', uplinkBytes: { a: 1 } }, [{ seq: 1, mode: 'ring', outcome: 'committed', startedAt: 1_000, endedAt: 1_000 + ms }], points, plan,
      variant, seed, 10, {});
  };
  const single = lmLabFigures({ jobId: 's', uplinkBytes: {} }, [{ seq: 1, mode: 'ring', outcome: 'committed', startedAt: 0, endedAt: 10 }],
    [{ seq: 512, step: 512, time: 10, loss: 2.8, accuracy: 0.3, bytesSent: null, workers: 1 }], plan, 'single', 1, 10, {});
  assert.equal(single.lossAtEqualTokens, 2.8);
  const runs = [single, run('ddp', 1, 100_000, 1e6, 2.85), run('diloco-dgc', 1, 20_000, 1e5, 2.86),
    run('diloco-q4', 1, 10_000, 6e4, 2.87), run('streaming-q4', 1, 12_000, 3e4, 2.82)];
  const figures = runs[4];
  assert.equal(figures.reached, true);
  assert.equal(figures.bytesToTarget, 3e4 * 6);
  assert.equal(figures.peakSyncBytes, 3e4);
  const { summary, met } = lmLabSummary({ mbit10: { mbit: 10, lab: null, runs, failedRuns: [], cells: lmLabCells(runs) } });
  assert.equal(summary.streaming_q4_loss_gap_vs_single, 0.02);
  assert.equal(summary.time_to_target_vs_ddp_10mbit, 10);
  assert.equal(summary.time_to_target_best_variant_10mbit, 'diloco-q4');
  assert.equal(summary.bytes_to_target_best_variant, 'streaming-q4');
  assert.equal(summary.bytes_to_target_vs_ddp, Math.round((1e6 / 3e4) * 10) / 10);
  assert.equal(summary.peak_sync_bytes_ratio_streaming, 2);
  assert.equal(summary.time_to_target_vs_diloco_dgc_2mbit, undefined, 'no 2 Mbit/s cap ran');
  assert.deepEqual(met, {
    streaming_q4_loss_gap_vs_single: true, bytes_to_target_vs_ddp: false, peak_sync_bytes_ratio_streaming: true, time_to_target_vs_ddp_10mbit: true,
    time_to_target_vs_diloco_dgc_2mbit: null,
  });
});
