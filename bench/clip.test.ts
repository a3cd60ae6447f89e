// `npm run bench -- clip --quick` end to end (dispatcher, child processes, CPU workers under a real
// attack) into a temporary file: every run finished, and the summary follows from the runs. Which
// factor wins is the full run's figure (bench/results/clip.json), not checked here.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { CLIP_RADIUS_FACTOR } from '@tabfleet/protocol';
import { runBench } from './child';
import { missingRecord } from './machine';

const dir = mkdtempSync(join(tmpdir(), 'tabfleet-bench-clip-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('npm run bench -- clip --quick writes runs and a summary that follows from them', { timeout: 5 * 60_000 }, async (t) => {
  const out = join(dir, 'clip.json');
  assert.equal(await runBench(['clip', '--quick', '--out', out], t.signal), 0);
  const r = JSON.parse(readFileSync(out, 'utf8'));
  assert.deepEqual(missingRecord(r), [], 'the run\'s commit, date, command, machine and duration (runRecord)');
  assert.equal(r.benchmark, 'clip');
  assert.equal(r.quick, true);
  const factors = r.summary.byFactor.map((f: any) => f.radiusFactor);
  assert.ok(factors.includes(CLIP_RADIUS_FACTOR), `the factor in use (${CLIP_RADIUS_FACTOR}) is among those measured: ${factors}`);
  assert.equal(r.summary.in_use, CLIP_RADIUS_FACTOR);
  for (const run of r.runs) assert.ok(run.validationAccuracy > 0.1 && run.validationCount === 5000, JSON.stringify(run));
  // 16 members per factor: honest and f = 7 sign-flip; 3 members per factor and the plain mean.
  assert.equal(r.runs.filter((x: any) => x.workers === 16).length, 2 * factors.length);
  assert.equal(r.runs.filter((x: any) => x.workers === 3).length, factors.length + 1);
  for (const f of r.summary.byFactor) {
    const attacked = r.runs.filter((x: any) => x.workers === 16 && x.radiusFactor === f.radiusFactor && x.attack !== null);
    assert.equal(f.worstAttackedValidation, Math.min(...attacked.map((x: any) => x.validationAccuracy)));
  }
  const best = Math.max(...r.summary.byFactor.map((f: any) => f.worstAttackedValidation));
  assert.equal(r.summary.byFactor.find((f: any) => f.radiusFactor === r.summary.chosen_radius_factor).worstAttackedValidation, best);
});
