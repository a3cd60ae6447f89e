// `npm run bench -- byzantine --quick` end to end (dispatcher, child processes, 16 CPU workers per
// cell through real Rings and Groups) into a temporary file, then the JSON's shape, what the quick
// attacks must do (a group refuses exactly the attackers; non-finite values collapse the ring's
// mean), the worst-attack choice, and a summary that agrees with the cells it comes from. Accuracy
// goals are the full run's (bench/results/byzantine.json), not checked here.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runBench } from './child';
import { checkQuickDgcReport } from './byzantine-dgc-checks';
import { missingRecord } from './machine';

const dir = mkdtempSync(join(tmpdir(), 'tabfleet-bench-byzantine-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const WORKERS = 16;
const PARAMS = 784 * 256 + 256 + 256 * 10 + 10;

test('npm run bench -- byzantine --quick writes a complete and consistent byzantine JSON', { timeout: 15 * 60_000 }, async (t) => {
  const out = join(dir, 'byzantine.json');
  assert.equal(await runBench(['byzantine', '--quick', '--runs', '1', '--out', out], t.signal), 0);
  const r = JSON.parse(readFileSync(out, 'utf8'));
  assert.deepEqual(missingRecord(r), [], 'the run\'s commit, date, command, machine and duration (runRecord)');
  assert.equal(r.benchmark, 'byzantine');
  assert.equal(r.quick, true);
  assert.equal(r.job.workers, WORKERS);
  const { lengths, matrix: m } = r.plan;
  const H = r.job.H;

  // The matrix: every attack × rule at each f > 0, the honest case once per rule, all finished.
  const expected = m.attackerCounts.flatMap((f: number) => (f === 0 ? m.rules.map((rule: string) => `0 null ` +
    `${rule}`) : m.attacks.flatMap((a: string) => m.rules.map((rule: string) => `${f} ${a} ${rule}`))));
  assert.deepEqual(r.matrix.map((c: any) => `${c.attackers} ${c.attack} ${c.rule}`).sort(), expected.sort());
  for (const c of [...r.matrix, ...r.fullCells]) {
    assert.equal(c.error, null, `${c.name}: ${c.error}`);
    const len = lengths[c.length];
    assert.equal(c.syncs, len.syncs, c.name);
    assert.equal(c.steps, len.syncs * H, c.name);
    assert.equal(c.testCount, len.evalExamples, c.name);
    assert.equal(c.validationCount, len.evalExamples, c.name);
    assert.ok(c.bytesPerWorkerPerSync > 2 * (15 / 16) * 4 * PARAMS && c.bytesPerWorkerPerSync < 1.01 * 2 * 4 * PARAMS, `${c.name}: ${c.bytesPerWorkerPerSync} bytes`);
    const group = c.rule !== 'mean';
    // What the quick attacks must do: every owner screens out ×100 and non-finite parts, and only those.
    const screened = group && c.attackers > 0 && (c.attack === 'scaled' || c.attack === 'non-finite');
    assert.deepEqual(c.refused, { attackers: screened ? c.attackers * c.syncs : 0, honest: 0 }, c.name);
    if (c.attack === 'non-finite' && !group) assert.ok(c.collapsed && c.testLoss === null && c.testAccuracy < 0.2, `${c.name}: NaN collapses the mean`);
    // Chance is 10%; a trainer that does not apply or average its updates stays near it.
    if (c.attackers === 0 || screened) assert.ok(!c.collapsed && c.testAccuracy > 0.4, `${c.name} learned (${c.testAccuracy})`);
  }

  // The worst attacks are the lowest validation accuracies of the short centered-clip cells at that f.
  for (const [key, f] of [['f5', 5], ['f7', 7]] as const) {
    const w = r.worstAttacks[key];
    const robust = r.matrix.filter((c: any) => c.attackers === f && c.rule === 'centered-clip');
    assert.equal(w.ranking.length, robust.length);
    for (const x of w.ranking) assert.equal(x.validationAccuracy, robust.find((c: any) => c.attack === x.attack).validationAccuracy);
    assert.deepEqual(w.ranking.map((x: any) => x.validationAccuracy), w.ranking.map((x: any) => x.validationAccuracy).sort((a: number, b: number) => a - b));
    assert.deepEqual(w.chosen, w.ranking.slice(0, r.plan.worstAttacksAtFullLength).map((x: any) => x.attack));
    assert.deepEqual(r.settings[`worst${key.toUpperCase()}`].map((s: any) => s.attack), w.chosen);
  }

  // Full-length settings: one cell per seed, summarised by their median.
  const settingCells = (s: any) => r.fullCells.filter((c: any) => c.attackers === s.attackers && c.attack === s.attack && c.rule === s.rule);
  const allSettings = [r.settings.clean, r.settings.meanScaledF1, ...r.settings.worstF5, ...r.settings.worstF7];
  assert.equal(r.fullCells.length, allSettings.length * r.plan.seeds.length);
  for (const s of allSettings) {
    const cells = settingCells(s);
    assert.deepEqual(cells.map((c: any) => c.seed).sort(), [...r.plan.seeds].sort());
    const accs = cells.map((c: any) => c.testAccuracy).sort((a: number, b: number) => a - b);
    assert.equal(s.testAccuracy.median, accs[accs.length >> 1]);
    assert.equal(s.collapsed, cells.filter((c: any) => c.collapsed).length);
  }

  const s = r.summary;
  assert.equal(s.clean_accuracy, r.settings.clean.testAccuracy.median);
  const worst = (settings: any[]) => settings.reduce((a, b) => (b.testAccuracy.median < a.testAccuracy.median ? b : a));
  assert.equal(s.worst_robust_accuracy_f5, worst(r.settings.worstF5).testAccuracy.median);
  assert.equal(s.worst_attack_f5, worst(r.settings.worstF5).attack);
  assert.equal(s.worst_robust_accuracy_f7, worst(r.settings.worstF7).testAccuracy.median);
  assert.equal(s.mean_accuracy_scaled_f1, r.settings.meanScaledF1.testAccuracy.median);
  assert.deepEqual([r.settings.meanScaledF1.attackers, r.settings.meanScaledF1.attack, r.settings.meanScaledF1.rule], [1, 'scaled', 'mean']);
  // One ×100 member of 16 pulls the plain mean far below the clean run even in two short syncs.
  assert.ok(s.mean_accuracy_scaled_f1 < s.clean_accuracy - 0.2, `mean with one ×100 attacker ${s.mean_accuracy_scaled_f1} vs clean ${s.clean_accuracy}`);

  // The overhead: both collectives move 2(N−1)/N of the vector plus headers; the ratios are the headline link's.
  const headline = r.overhead.links.capped_uplink;
  for (const link of Object.values<any>(r.overhead.links)) {
    for (const x of [link.ring, link.group]) assert.ok(x.bytesPerWorker > 2 * (15 / 16) * 4 * PARAMS && x.bytesPerWorker < 1.01 * 2 * 4 * PARAMS);
    assert.equal(link.ring.exchangeMs.samples.length, r.plan.overheadReps);
    assert.equal(link.timeRatio, link.validated.exchangeMs.median / link.ring.exchangeMs.median);
    assert.equal(link.averageOnlyTimeRatio, link.group.exchangeMs.median / link.ring.exchangeMs.median);
  }
  assert.equal(s.honest_overhead_bytes, headline.validated.bytesPerWorker / headline.ring.bytesPerWorker);
  assert.equal(s.average_only_overhead_bytes, headline.group.bytesPerWorker / headline.ring.bytesPerWorker);
  // Validation moves ≈ 21% of the parts once more (3 or 4 of 16 drawn): about 1/10 more bytes.
  assert.ok(s.honest_overhead_bytes > s.average_only_overhead_bytes && s.honest_overhead_bytes < s.average_only_overhead_bytes * 1.25,
    `${s.honest_overhead_bytes} vs ${s.average_only_overhead_bytes}`);

  // Verification: a lying owner caught in every trial, with nobody honest removed; honest replicas agree.
  const { ownerLie, recompute } = r.verification;
  assert.equal(ownerLie.rounds.length, ownerLie.trials);
  assert.ok(ownerLie.rounds.every((n: number) => n >= 1));
  assert.equal(s.owner_lie_caught_rounds, ownerLie.medianRounds);
  assert.equal(ownerLie.honestRemoved, 0);
  assert.equal(recompute.perUnit.length, recompute.units);
  assert.equal(s.recompute_false_positive_rate, recompute.perUnit.filter((u: any) => !u.agree).length / recompute.units);
  assert.equal(recompute.faultyRefused, recompute.units, 'a result 1.5× too long is always refused');
  assert.equal(s.honest_overhead_time, headline.timeRatio);
  // 10 Mbit/s uplinks: the ring's 2(N − 1) latency-bound steps take over a second, whatever the CPU.
  assert.ok(headline.ring.exchangeMs.min > 1000, `ring ${headline.ring.exchangeMs.min} ms`);

  // Goals follow from the figures.
  assert.equal(s.goals.worst_robust_accuracy_f5, s.clean_accuracy - 0.02);
  assert.equal(s.goals.worst_robust_accuracy_f7, s.clean_accuracy - 0.05);
  assert.deepEqual(s.goals_met, {
    worst_robust_accuracy_f5: s.worst_robust_accuracy_f5 >= s.goals.worst_robust_accuracy_f5,
    worst_robust_accuracy_f7: s.worst_robust_accuracy_f7 >= s.goals.worst_robust_accuracy_f7,
    mean_accuracy_scaled_f1: r.settings.meanScaledF1.collapsed === r.plan.seeds.length,
    honest_overhead_bytes: s.honest_overhead_bytes <= s.goals.honest_overhead_bytes,
    honest_overhead_time: s.honest_overhead_time <= s.goals.honest_overhead_time,
    owner_lie_caught_rounds: ownerLie.notCaught === 0 && s.owner_lie_caught_rounds <= 3,
    recompute_false_positive_rate: recompute.falsePositives === 0 && recompute.faultyRefused === recompute.units,
  });
  for (const key of ['clean_accuracy', 'worst_robust_accuracy_f5', 'worst_robust_accuracy_f7', 'mean_accuracy_scaled_f1', 'honest_overhead_bytes', 'honest_overhead_time',
    'owner_lie_caught_rounds', 'recompute_false_positive_rate', 'short', 'full']) {
    assert.equal(typeof r.definitions[key], 'string', `definitions.${key}`);
  }
  assert.equal(r.timings.short.cells, r.matrix.length);
  assert.equal(r.timings.full.cells, r.fullCells.length);
  checkN64(r);
  // Rejoining Sybils through the real server, and DGC under CenteredClip: their keys are their reports'.
  assert.equal(s.group_capture_rate, r.capture.rate);
  assert.equal(r.capture.rate, r.capture.captured / r.capture.groupSyncs);
  assert.equal(s.group_capture_rate_within_random, r.capture.rate <= r.capture.randomRate + r.capture.ci95);
  assert.ok(r.capture.rejoins > 0, 'Sybils rejoined');
  assert.equal(s.dgc_robust_accuracy_drop_pts, r.dgc.dgc_robust_accuracy_drop_pts);
  assert.equal(s.dgc_robust_accuracy_drop_goal_met, r.dgc.dgc_robust_accuracy_drop_pts <= r.dgc.goal && r.dgc.validation.chosenIsDefault);
  // The test-split runs use the validation sweep's choice.
  assert.equal(s.dgc_robust_sparsity, r.dgc.validation.chosen);
  assert.equal(s.dgc_validation_chosen_sparsity, r.dgc.validation.chosen);
  assert.ok(Math.abs(r.dgc.dgc_robust_accuracy_drop_pts - 100 * (r.dgc.medians.dense - r.dgc.medians.dgc)) < 1e-9);
  checkQuickDgcReport(r.dgc, r.job);
});

/** The N = 64 section: 64 members in robust groups of 16, every planned attack at 6 and 13 attackers, and the summary keys it gives. */
function checkN64(r: any): void {
  const n = r.n64;
  const { attacks, seeds, syncs } = r.plan.n64;
  assert.deepEqual(n.plan.attackers, { f10: 6, f20: 13 }, '10% and 20% of 64, rounded to the nearest member');
  assert.equal(n.cells.length, (1 + 2 * attacks.length) * seeds.length);
  assert.equal(r.timings.n64.cells, n.cells.length);
  for (const c of n.cells) {
    assert.equal(c.error, null, `${c.name}: ${c.error}`);
    assert.deepEqual([c.members, c.groupSize, c.rule, c.syncs, c.steps], [64, 16, 'centered-clip', syncs, syncs * r.job.H], c.name);
    assert.equal(c.groupSyncs, 4 * syncs, `${c.name}: four groups of 16 every sync`);
    assert.equal(c.refused.honest, 0, c.name);
    // Six attackers can never hold 9 of a group of 16.
    if (c.attackers <= 6) assert.equal(c.attackerMajorityGroups, 0, c.name);
    if (c.attack === 'scaled') assert.ok(c.refused.attackers > 0, `${c.name}: ×100 screened`);
    if (c.attack === 'slow-drift') assert.equal(c.refused.attackers, 0, `${c.name}: the drift passes the screen`);
    if (c.attackers === 0 || c.attack === 'scaled') assert.ok(!c.collapsed && c.testAccuracy > 0.4, `${c.name} learned (${c.testAccuracy})`);
  }
  const s = r.summary;
  assert.equal(s.clean_accuracy_n64, n.settings.clean.testAccuracy.median);
  for (const key of ['f10', 'f20']) {
    const settings = n.settings.byShare[key];
    assert.deepEqual(settings.map((x: any) => x.attack), attacks, `${key}: every attack`);
    const worst = settings.reduce((a: any, b: any) => (b.testAccuracy.median < a.testAccuracy.median ? b : a));
    assert.equal(s[`worst_accuracy_n64_${key}`], worst.testAccuracy.median);
    assert.equal(s[`worst_attack_n64_${key}`], worst.attack);
    const cells = n.cells.filter((c: any) => c.attackers === n.plan.attackers[key]);
    const capture = s.group_capture_rate_runner[key];
    assert.equal(capture.group_syncs, cells.reduce((a: number, c: any) => a + c.groupSyncs, 0));
    assert.equal(capture.captured, cells.reduce((a: number, c: any) => a + c.attackerMajorityGroups, 0));
  }
  assert.equal(s.group_capture_rate_runner.f10.hypergeometric, 0, 'six cannot make 9');
  const f20 = s.group_capture_rate_runner.f20;
  // 13 of 64: P(X ≥ 9) for X hypergeometric (64, 13, 16) ≈ 4e-4, below the binomial (16, 13/64) tail.
  assert.ok(f20.hypergeometric > 0 && f20.hypergeometric < f20.binomial && f20.binomial < 0.01, `${f20.hypergeometric} ${f20.binomial}`);
  assert.equal(s.goals_n64.worst_accuracy_n64_f10, s.clean_accuracy_n64 - 0.02);
  assert.equal(s.goals_n64.worst_accuracy_n64_f20, s.clean_accuracy_n64 - 0.05);
  assert.deepEqual(s.goals_met_n64, {
    worst_accuracy_n64_f10: s.worst_accuracy_n64_f10 >= s.goals_n64.worst_accuracy_n64_f10,
    worst_accuracy_n64_f20: s.worst_accuracy_n64_f20 >= s.goals_n64.worst_accuracy_n64_f20,
    group_capture_rate_runner: f20.rate <= f20.upper95 && s.group_capture_rate_runner.f10.rate <= s.group_capture_rate_runner.f10.upper95,
  });
  for (const key of ['cells', 'length', 'attacks', 'worst_accuracy_n64', 'group_capture_rate_runner']) assert.equal(typeof r.definitions.n64[key], 'string', key);
  assert.ok(n.loadAverageAtStart.length === 3 && n.loadAverageAtEnd.length === 3);
}

test('--only n64 re-runs the N = 64 section into the report and keeps the others', { timeout: 8 * 60_000 }, async (t) => {
  const out = join(dir, 'byzantine.json');
  const before = JSON.parse(readFileSync(out, 'utf8'));
  assert.equal(await runBench(['byzantine', '--quick', '--only', 'n64', '--out', out], t.signal), 0);
  const r = JSON.parse(readFileSync(out, 'utf8'));
  assert.equal(typeof r.sectionCommits.n64, 'string');
  assert.ok(r.sectionDates.n64 > before.sectionDates.n64, 'the section is dated anew');
  assert.deepEqual(r.matrix.map((c: any) => [c.name, c.wallMs]), before.matrix.map((c: any) => [c.name, c.wallMs]), 'the matrix is kept');
  assert.notDeepEqual(r.n64.cells.map((c: any) => c.wallMs), before.n64.cells.map((c: any) => c.wallMs), 'the section ran again');
  checkN64(r);
});

test('--only robust re-runs the centered-clip cells and what they choose, and keeps the other rules\' cells', { timeout: 5 * 60_000 }, async (t) => {
  const out = join(dir, 'byzantine.json');
  const before = JSON.parse(readFileSync(out, 'utf8'));
  assert.equal(await runBench(['byzantine', '--quick', '--only', 'robust', '--out', out], t.signal), 0);
  const r = JSON.parse(readFileSync(out, 'utf8'));
  assert.ok(r.sectionDates.robust > before.sectionDates.matrix, 'the robust section is dated anew');
  assert.match(r.command, /--only robust/, 'the top-level record names the partial run');
  assert.equal(r.sectionCommits.matrix, before.sectionCommits.matrix, 'sections not re-run keep their commit');
  assert.equal(typeof r.sectionCommits.robust, 'string');
  assert.equal(r.matrix.length, before.matrix.length);
  const others = (x: any) => x.matrix.filter((c: any) => c.rule !== 'centered-clip').map((c: any) => [c.name, c.testAccuracy, c.wallMs]);
  assert.deepEqual(others(r), others(before), 'the other rules\' cells are kept as they were');
  const robustWall = (x: any) => x.matrix.filter((c: any) => c.rule === 'centered-clip').map((c: any) => c.wallMs);
  assert.notDeepEqual(robustWall(r), robustWall(before), 'the centered-clip cells ran again');
  assert.equal(r.fullCells.length, before.fullCells.length);
  assert.equal(r.summary.clean_accuracy, r.settings.clean.testAccuracy.median);
  assert.equal(r.summary.worst_attack_f7, r.worstAttacks.f7.chosen[0]);
});

test('--only re-runs only the sections that can run alone, and refuses the others before running anything', { timeout: 60_000 }, async (t) => {
  const code = await runBench(['byzantine', '--quick', '--only', 'matrix', '--out', join(dir, 'nothing.json')], t.signal);
  assert.equal(code, 1);
  assert.equal(existsSync(join(dir, 'nothing.json')), false);
});
