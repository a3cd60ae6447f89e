// `npm run bench -- heterogeneous --quick` end to end (dispatcher, Dawn in Node, Fashion-MNIST) into a
// temporary file, then the JSON for both workloads (MLP, GPT): every variant ran on the same samples,
// paced rounds gave slower workers fewer steps, and the summary is computed from the runs. The goals live in the full run's JSON.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runBench } from './child';
import { missingRecord } from './machine';

const dir = mkdtempSync(join(tmpdir(), 'tabfleet-bench-heterogeneous-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('npm run bench -- heterogeneous --quick writes a complete JSON', { timeout: 8 * 60_000 }, async (t) => {
  const out = join(dir, 'heterogeneous.json');
  assert.equal(await runBench(['heterogeneous', '--quick', '--out', out], t.signal), 0);
  const r = JSON.parse(readFileSync(out, 'utf8'));
  assert.deepEqual(missingRecord(r), [], 'the run\'s commit, date, command, machine and duration (runRecord)');
  assert.equal(r.benchmark, 'heterogeneous');
  assert.deepEqual(r.setup.speeds, [1, 1, 1, 2, 2, 4, 4, 8]);
  for (const name of ['mlp', 'gpt']) {
    const setup = r.setup.workloads[name];
    const byVariant = (v: string) => r.results.find((x: any) => x.workload === name && x.variant === v);
    for (const v of ['equal-fixed', 'hetero-fixed', 'hetero-paced']) {
      const x = byVariant(v);
      assert.ok(x.samples >= setup.totalSamples && x.samples < setup.totalSamples + 8 * 64 * setup.batch, `${name} ${v}: ${x.samples} samples`);
      assert.ok(x.utilization > 0 && x.utilization <= 1.05, `${name} ${v}: utilization ${x.utilization}`);
      // The MLP's chance is 10%; the GPT's is ln 256 = 5.55 nats per byte (measured 4.2 in quick mode, the fixed runs being deterministic).
      if (name === 'mlp') assert.ok(x.finalTest > 0.5, `${v}: test accuracy ${x.finalTest}`);
      else assert.ok(x.finalTest < 4.5, `${v}: test loss ${x.finalTest}`);
      if (x.msToTarget !== null) assert.ok(x.evals.some((e: any) => e.modeledMs === x.msToTarget && (name === 'mlp' ? e.value >= setup.target : e.value <= setup.target)));
    }
    // Fixed H: every worker the same steps. Paced: the 8× slower one did fewer than the median of the
    // three fastest, by a margin on their mean (on a loaded machine the measured paces differ by less
    // than the slowdowns, and one fast worker starved of CPU for a round did as few as 4 steps: stop 43).
    const fixed = byVariant('hetero-fixed').stepsPerWorker;
    assert.ok(fixed.every((n: number) => n === fixed[0]), `${name} fixed-H steps ${fixed}`);
    const paced = byVariant('hetero-paced').stepsPerWorker;
    const fastest = paced.slice(0, 3).sort((a: number, b: number) => a - b);
    assert.ok(paced[7] < fastest[1] && 1.5 * paced[7] < fastest.reduce((a: number, b: number) => a + b, 0) / 3, `${name} paced steps ${paced}`);
    assert.ok(byVariant('hetero-paced').roundTimes.length >= 1);
    const prefix = name === 'mlp' ? '' : 'gpt_';
    assert.equal(r.summary[`${prefix}paced_utilization`], byVariant('hetero-paced').utilization);
    assert.equal(r.summary[`${prefix}fixed_utilization`], byVariant('hetero-fixed').utilization);
    assert.ok(r.summary[`${prefix}autotune_round_time_error`] >= 0);
  }
  // The GPT's target is read off its runs: every variant reached it.
  assert.ok(r.results.filter((x: any) => x.workload === 'gpt').every((x: any) => x.msToTarget !== null));
});
