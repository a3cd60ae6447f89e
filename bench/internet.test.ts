// `npm run bench -- internet --quick` end to end (dispatcher, a network lab with coturn and the
// signaling relay on a public host, member processes over real WebRTC in NATed homes) into a temporary
// file, then the JSON: its run record, every NAT case and net measured with the candidate pairs it
// expects, the figures consistent with the runs, the summary holding only what was measured and each
// target judged against the fixed thresholds. Then the parts with the real server and Node volunteers
// (two homes of two): the flat and by-homes jobs committed every sync as ring rounds and their uplink
// bytes are at least what the algorithms must send; the auto job's predictions are the server's and
// their median is the key. Speed lives in the JSON, not here. Needs root (the lab).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gptLayout } from '@tabfleet/protocol';
import { runBench } from './child';
import { NETS, PENDING_SECTIONS, SETUP_CASES, TARGETS, internetBenchConfig } from './internet/config';
import { missingRecord } from './machine';
import { median } from './stats';

const dir = mkdtempSync(join(tmpdir(), 'tabfleet-bench-internet-'));
after(() => rmSync(dir, { recursive: true, force: true }));

// The report is checked field by field below, so it is read loosely typed.
type Json = Record<string, any>;

test('npm run bench -- internet --quick writes a complete internet JSON', { timeout: 25 * 60_000 }, async (t) => {
  const out = join(dir, 'internet.json');
  const code = await runBench(['internet', '--quick', '--out', out], t.signal);
  assert.equal(code, 0, 'the benchmark exits 0');
  const r: Json = JSON.parse(readFileSync(out, 'utf8'));
  assert.deepEqual(missingRecord(r), [], 'the run\'s commit, date, command, machine and duration (runRecord)');
  assert.equal(r.benchmark, 'internet');
  assert.equal(r.quick, true);
  assert.match(r.command, /^npm run bench -- internet --quick/);
  const cfg = internetBenchConfig(2, true);
  assert.deepEqual(r.options, cfg);
  assert.deepEqual(r.targets, TARGETS, 'the targets fixed in internet/config.ts');
  assert.match(r.lab.coturn, /coturn/);
  assert.ok(!JSON.stringify(r).includes('static-auth-secret'), 'the TURN secret is not in the JSON');

  // Every NAT case: every link opened, with the candidate pairs the case expects.
  assert.deepEqual(r.setup.map((s: Json) => s.name), SETUP_CASES.map((c) => c.name));
  for (const s of r.setup as Json[]) {
    assert.equal(s.attempts, cfg.setupSamples, s.name);
    assert.equal(s.opened + s.failures.length, s.attempts, `${s.name}: every attempt opened or failed`);
    assert.deepEqual(s.failures, [], `${s.name}: no failed setup`);
    assert.equal(s.unexpectedPairs, 0, `${s.name}: pairs ${JSON.stringify(s.pairs)}`);
    assert.equal(s.passed, true, s.name);
    assert.equal(s.samplesMs.length, s.opened);
    assert.equal(s.setupMs.count, s.opened);
    assert.ok(s.setupMs.p50 > 0 && s.setupMs.p50 <= s.setupMs.p99 && s.setupMs.p99 <= s.setupMs.max, `${s.name}: percentiles in order`);
    // Two ends per link: each end's view of its selected pair is counted once per link.
    assert.equal(Object.values(s.pairs as Record<string, number>).reduce((a, n) => a + n, 0), 2 * s.opened);
  }
  const relayedTcp = r.setup.find((s: Json) => s.name === 'udp-blocked-eim');
  assert.ok(Object.keys(relayedTcp.pairs).some((k) => k.startsWith('u1: relay(tcp)')), 'the UDP-blocked home relays over TCP');

  // Both nets: 4 members, 6 links, all opened as expected.
  assert.deepEqual(r.nets.map((n: Json) => n.name), Object.keys(NETS));
  for (const n of r.nets as Json[]) {
    assert.equal(n.error, null, n.name);
    assert.equal(n.links.length, 6, n.name);
    assert.ok(n.links.every((l: Json) => l.meets), `${n.name}: ${JSON.stringify(n.links.map((l: Json) => l.pairs))}`);
    assert.equal(n.passed, true);
  }
  assert.ok(r.nets[1].links.every((l: Json) => l.pairs.some((p: Json) => p.local === 'relay' || p.remote === 'relay')), 'relayed net: every link through coturn');

  // Collectives: one figure per run, medians of the runs, busbw from the median time.
  const bytes = cfg.values * 4;
  for (const net of Object.keys(NETS)) {
    for (const op of ['ring', 'group', 'validated']) {
      const f = r.collectives[net][op];
      const where = `${net} ${op}`;
      assert.equal(f.runsMs.length, cfg.runs, where);
      assert.ok(f.runsMs.every((ms: number) => ms > 0), where);
      assert.ok(Math.abs(f.medianMs - median(f.runsMs)) < 0.2, `${where}: median`);
      const busbw = (bytes / 1e6 / (f.medianMs / 1000)) * 1.5;
      assert.ok(Math.abs(f.busbw_MBps - busbw) <= 0.002 + 1e-3 * busbw, `${where}: busbw ${f.busbw_MBps} vs ${busbw}`);
      // Ring and group send 2(N−1)/N of the vector; the validation adds the drawn parts.
      for (const b of f.bytesOutPerMember) assert.ok(b >= 1.5 * bytes, `${where}: ${b} bytes out`);
    }
    assert.ok(r.collectives[net].validated.checks.every((c: number) => c >= 0));
  }

  // The summary: exactly the keys this benchmark measured, consistent with the sections.
  const s = r.summary;
  assert.deepEqual(Object.keys(s).sort(), [
    'autotune_error_measured', 'diloco_dgc_reached_target', 'diloco_dgc_seconds_to_target', 'diloco_dgc_speedup_measured', 'diloco_dgc_speedup_measured_per_seed',
    'hierarchical_uplink_bytes_ratio', 'link_setup_p99_ms', 'nat_cases_passed', 'nat_cases_total', 'relayed_busbw_over_direct', 'robust_time_overhead_measured',
  ]);
  for (const pending of Object.keys(PENDING_SECTIONS)) assert.equal(s[pending], undefined, `${pending} is not measured here`);
  assert.deepEqual(r.pending, PENDING_SECTIONS);
  assert.equal(s.nat_cases_total, SETUP_CASES.length + Object.keys(NETS).length);
  assert.equal(s.nat_cases_passed, s.nat_cases_total);
  assert.equal(s.link_setup_p99_ms, Math.max(...r.setup.map((x: Json) => x.setupMs.p99)));
  const ratio = r.collectives.relayed.ring.busbw_MBps / r.collectives.direct.ring.busbw_MBps;
  assert.ok(Math.abs(s.relayed_busbw_over_direct - ratio) <= 0.001, `relayed/direct ${s.relayed_busbw_over_direct} vs ${ratio}`);
  const overhead = r.collectives.direct.validated.medianMs / r.collectives.direct.ring.medianMs;
  assert.ok(Math.abs(s.robust_time_overhead_measured - overhead) <= 0.001, `robust overhead ${s.robust_time_overhead_measured} vs ${overhead}`);
  assert.deepEqual(r.met, {
    nat_cases: true,
    link_setup_p99_ms: s.link_setup_p99_ms < TARGETS.link_setup_p99_ms.below,
    relayed_busbw_over_direct: s.relayed_busbw_over_direct >= TARGETS.relayed_busbw_over_direct.atLeast,
    robust_time_overhead_measured: s.robust_time_overhead_measured <= TARGETS.robust_time_overhead_measured.atMost,
    hierarchical_uplink_bytes_ratio: s.hierarchical_uplink_bytes_ratio >= TARGETS.hierarchical_uplink_bytes_ratio.atLeast,
    autotune_error_measured: s.autotune_error_measured <= TARGETS.autotune_error_measured.atMost,
    diloco_dgc_speedup_measured: s.diloco_dgc_speedup_measured >= TARGETS.diloco_dgc_speedup_measured.atLeast,
  });
  checkHierarchical(r.hierarchical, cfg.hierarchicalSyncs, s.hierarchical_uplink_bytes_ratio);
  checkAutotune(r.autotune, s.autotune_error_measured);
  checkDiloco(r.diloco, cfg.diloco, s);
});

/**
 * Both variants ran on every seed as the plan says, DDP one ring round a step and DiLoCo one per H,
 * every round a committed ring round; the times are the server's evaluations; the key is the ratio of
 * the medians and the per-seed values beside it are the runs'.
 */
function checkDiloco(d: Json, plan: Json, s: Json) {
  assert.equal(d.error, undefined, `diloco: ${d.error}`);
  assert.deepEqual(d.failedRuns, []);
  assert.deepEqual(d.plan, plan);
  assert.equal(d.uplinkMbit, 10);
  assert.deepEqual(d.runs.map((r: Json) => `${r.variant}/${r.seed}`), plan.seeds.flatMap((seed: number) => [`ddp/${seed}`, `diloco-dgc/${seed}`]), 'seeds interleaved');
  for (const r of d.runs as Json[]) {
    const where = `${r.variant} seed ${r.seed} (job ${r.jobId})`;
    // Stopping the volunteers at the target may abort the round then under way, and only that one.
    assert.deepEqual(r.otherRounds.filter((x: Json) => !x.afterCounted), [], `${where}: every round until the target a committed ring round`);
    assert.ok(r.otherRounds.length <= 1, `${where}: ${JSON.stringify(r.otherRounds)}`);
    assert.equal(r.spec.strategy, r.variant === 'ddp' ? 'ddp' : 'diloco');
    assert.equal(r.spec.compression, r.variant === 'ddp' ? 'none' : 'dgc');
    assert.ok(r.evals.length >= 1, `${where}: evaluated`);
    for (const e of r.evals as Json[]) assert.equal(e.step % plan.evalEverySteps, 0, `${where}: evaluations every ${plan.evalEverySteps} steps`);
    // DDP: a sync a step; DiLoCo: a sync every H steps. The run stops at an evaluation, a sync or so later.
    const perSync = r.variant === 'ddp' ? 1 : plan.H;
    assert.ok(r.syncs >= r.stepAtTarget / perSync, `${where}: ${r.syncs} syncs by step ${r.stepAtTarget}`);
    const hit = r.evals.find((e: Json) => e.loss <= plan.target);
    assert.equal(r.reached, hit !== undefined, where);
    if (hit) assert.deepEqual([r.msToTarget, r.msCounted, r.stepAtTarget], [hit.ms, hit.ms, hit.step], where);
    assert.ok(r.msCounted > 0 && r.split.inRoundsMs > 0 && r.split.inRoundsMs + r.split.betweenRoundsMs === r.msCounted, `${where}: ${JSON.stringify(r.split)}`);
    assert.equal(r.uplinkBytesTotal, Object.values(r.uplinkBytes as Record<string, number>).reduce((a, b) => a + b, 0));
    assert.deepEqual(Object.keys(r.uplinkBytes).sort(), ['a', 'b', 'c', 'd']);
  }
  // DDP's ring sends 2(N − 1)/N = 1.5 vectors (fp32) a step out of each home, headers on top; DGC a small fraction of that.
  const vectorBytes = 4 * gptLayout({ ...plan.gpt, vocab: 256 }).length;
  for (const r of d.runs.filter((x: Json) => x.variant === 'ddp')) {
    for (const home of ['a', 'b', 'c', 'd']) assert.ok(r.uplinkBytes[home] >= 1.5 * vectorBytes * r.syncs, `ddp seed ${r.seed}, home ${home}: ${r.uplinkBytes[home]} bytes`);
  }
  assert.ok(d.uplinkBytesRatio > 1, `DDP sent more over the uplinks than DiLoCo + DGC: ${d.uplinkBytesRatio}`);
  const ms = (v: string) => d.runs.filter((r: Json) => r.variant === v).map((r: Json) => r.msCounted);
  assert.ok(Math.abs(d.speedup - median(ms('ddp')) / median(ms('diloco-dgc'))) < 1e-9);
  assert.ok(Math.abs(s.diloco_dgc_speedup_measured - d.speedup) <= 0.001);
  assert.deepEqual(s.diloco_dgc_speedup_measured_per_seed, d.speedupPerSeed.map((x: Json) => Math.round(x.speedup * 1000) / 1000));
  assert.deepEqual(s.diloco_dgc_reached_target, { ddp: d.variants.ddp.reached, 'diloco-dgc': d.variants['diloco-dgc'].reached });
}

/** Both jobs committed every sync as ring rounds, in the ring orders each arrangement makes, and sent at least what the algorithms must. */
function checkHierarchical(h: Json, syncs: number, key: number) {
  assert.equal(h.error, undefined, `hierarchical: ${h.error}`);
  assert.equal(h.uplinkMbit, 10);
  for (const run of [h.flat, h.hierarchical]) {
    assert.equal(run.committed, syncs, `job ${run.jobId}: ${JSON.stringify(run.rounds)}`);
    assert.deepEqual(run.rounds.filter((x: Json) => x.mode !== 'ring'), [], 'no star round');
    assert.ok(run.syncMsP50 > 0);
    assert.equal(run.uplinkBytesTotal, run.uplinkBytes.a + run.uplinkBytes.b);
  }
  assert.deepEqual(h.flat.ringHomes, ['a', 'b', 'a', 'b'], 'the flat ring follows join order');
  assert.deepEqual(h.hierarchical.ringHomes, ['a', 'a', 'b', 'b'], 'by homes, members are listed home by home');
  // Per sync and home: flat, two members each send 1.5 vectors across; by homes, the leader sends one.
  const v = h.vectorBytes * syncs;
  for (const home of ['a', 'b']) {
    assert.ok(h.flat.uplinkBytes[home] >= 3 * v, `flat, home ${home}: ${h.flat.uplinkBytes[home]} bytes`);
    assert.ok(h.hierarchical.uplinkBytes[home] >= v, `by homes, home ${home}: ${h.hierarchical.uplinkBytes[home]} bytes`);
  }
  assert.ok(Math.abs(h.uplinkBytesRatio - h.flat.uplinkBytesTotal / h.hierarchical.uplinkBytesTotal) < 1e-9);
  assert.ok(Math.abs(key - h.uplinkBytesRatio) <= 0.001, `key ${key} vs ${h.uplinkBytesRatio}`);
}

/** The auto job committed its syncs; the key is the median of the predictions seen, which agree with the server's own score. */
function checkAutotune(a: Json, key: number) {
  assert.equal(a.error, undefined, `autotune: ${a.error}`);
  assert.equal(a.spec.pacing, 'auto');
  assert.deepEqual(a.rounds.filter((x: Json) => x.mode !== 'ring'), [], 'no star round');
  assert.ok(a.committed >= 3, `${a.committed} syncs`);
  assert.ok(a.predictions.length >= 1, 'syncs scored');
  for (const p of a.predictions as Json[]) {
    assert.ok(p.predictedMs > 0 && p.actualMs > 0, JSON.stringify(p));
    assert.ok(Math.abs(p.error - Math.abs(p.predictedMs - p.actualMs) / p.actualMs) < 1e-9);
    assert.ok(p.auto !== null && p.auto.H >= 1, 'auto chose an H');
  }
  assert.ok(a.predictions.every((p: Json, i: number) => i === 0 || p.seq > a.predictions[i - 1].seq), 'one pair per commit');
  const errors = a.predictions.map((p: Json) => p.error).sort((x: number, y: number) => x - y);
  assert.equal(a.medianError, errors[(errors.length - 1) >> 1]);
  assert.ok(Math.abs(key - a.medianError) <= 0.001);
  // Every commit seen and at most the 32 the server keeps: the server's median is ours, but for its unrounded predictions.
  if (a.unseenCommits === 0 && a.predictions.length <= 32) assert.ok(Math.abs(a.serverMedianError - a.medianError) < 0.002, `${a.serverMedianError} vs ${a.medianError}`);
}
