// `npm run bench -- groups --quick` end to end (dispatcher, Dawn in Node, Fashion-MNIST, 32 workers)
// into a temporary file, then the JSON: both averagings trained on the same samples, grouped members
// agree inside groups but not across them, and the departure re-ran only the leaver's group. The
// accuracy goal lives in the full run's JSON (bench/results/groups.json).
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runBench } from './child';
import { missingRecord } from './machine';

const dir = mkdtempSync(join(tmpdir(), 'tabfleet-bench-groups-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('npm run bench -- groups --quick writes a complete JSON', { timeout: 8 * 60_000 }, async (t) => {
  const out = join(dir, 'groups.json');
  assert.equal(await runBench(['groups', '--quick', '--out', out], t.signal), 0);
  const r = JSON.parse(readFileSync(out, 'utf8'));
  assert.deepEqual(missingRecord(r), [], 'the run\'s commit, date, command, machine and duration (runRecord)');
  assert.equal(r.benchmark, 'groups');
  assert.deepEqual([r.setup.workers, r.setup.groupSize], [32, 8]);
  const of = (v: string) => r.results.find((x: any) => x.variant === v);
  const [ring, moshpit, departure] = [of('ring'), of('moshpit'), of('moshpit-departure')];
  assert.equal(ring.samples, moshpit.samples, 'equal samples');
  // One ring: every member holds the same model. Groups: members differ across groups.
  assert.ok(ring.consensus.every((c: number) => c < 1e-6), `ring consensus ${ring.consensus}`);
  assert.ok(moshpit.consensus.every((c: number) => c > 1e-6), `grouped consensus ${moshpit.consensus}`);
  // Chance is 10%; two syncs of 4 steps (quick) on 32 members already learn (74–76% measured).
  for (const x of [ring, moshpit, departure]) assert.ok(x.meanModelTestAccuracy > 0.5 && x.memberTestAccuracy > 0.5, `${x.variant}: ${x.meanModelTestAccuracy}, ${x.memberTestAccuracy}`);
  assert.ok(r.summary.grouped_bytes_ratio < 1, 'a member of a group of 8 sends less than one of a ring of 32');
  assert.equal(r.summary.departure_groups_rerun, 1, 'only the leaver\'s group re-ran');
  assert.equal(r.summary.departure_groups, 4);
  assert.equal(r.summary.grouped_accuracy_gap_pts, 100 * (ring.meanModelTestAccuracy - moshpit.meanModelTestAccuracy));
});
