// Results files record their run, and the figures the docs quote are the results files' (figures.ts).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { missingRecord } from './run-record';
import { checkCitation, checkDocs, citationsIn, resolvePath, scaleFor } from './figures';

const root = join(import.meta.dirname, '..');
const resultsDir = join(root, 'bench', 'results');

test('every results file records commit, date, command, machine and duration (bench/machine.ts runRecord)', () => {
  const files = readdirSync(resultsDir).filter((f) => f.endsWith('.json') && !f.endsWith('.quick.json'));
  assert.ok(files.length >= 10, `only ${files.length} results files`);
  const lacking = files.flatMap((f) => {
    const missing = missingRecord(JSON.parse(readFileSync(join(resultsDir, f), 'utf8')));
    return missing.length ? [`${f}: ${missing.join(', ')}`] : [];
  });
  assert.deepEqual(lacking, [], 'results files without runRecord\'s fields');
});

test('every figure README.md and docs/ cite equals its results file', () => {
  const { citations, problems } = checkDocs(root);
  assert.deepEqual(problems, [], `stale or broken citations: rewrite the prose to the results file's value\n${problems.join('\n')}`);
  // So the check cannot pass by finding nothing.
  // 82 when this was written: removing citations should be a decision, not an accident.
  assert.ok(citations.length >= 80, `only ${citations.length} citations found`);
  assert.ok(new Set(citations.map((c) => c.file)).size >= 14, 'citations of at least 14 results files');
});

const fixture = {
  summary: { round_p99_ms: 359.6, ratio: 1.0937, accuracy: 0.8154, cpu_percent: 41.2, total_bytes: 3 * 2 ** 20, attack: 'sign-flip' },
  results: [
    { size: 4, fixed: { msToConsensus: 15_351.8 } },
    { size: 8, fixed: { msToConsensus: 12_385.3 } },
  ],
};
const load = (f: string) => (f === 'fix.json' ? fixture : undefined);
const check = (md: string) => citationsIn('doc.md', md).map((c) => checkCitation(c, load));

test('the checker accepts figures at their decimals, units and lists', () => {
  assert.deepEqual(check('a p99 of 360 ms (`fix.json summary.round_p99_ms`), or 0.36 s (`fix.json summary.round_p99_ms`)'), [null, null]);
  assert.deepEqual(check('moves 1.09× (`fix.json summary.ratio`) the bytes; 81.54% (`fix.json summary.accuracy`), 82% (`fix.json summary.accuracy`)'), [null, null, null]);
  assert.deepEqual(check('CPU 41% (`fix.json summary.cpu_percent`); 3 MiB (`fix.json summary.total_bytes`)'), [null, null]);
  assert.deepEqual(check('groups of 4, 8 take 15.4, 12.4 s\n(`fix.json results.fixed.msToConsensus`) or 15/12 s (`fix.json results.fixed.msToConsensus`)'), [null, null]);
  assert.deepEqual(check('the worst was sign-flip (`fix.json summary.attack`), or `sign-flip` (`fix.json summary.attack`)'), [null, null]);
  assert.deepEqual(check('8 mixes in 12.39 s (`fix.json results[size=8].fixed.msToConsensus`) and 4 in 15,352 ms (`fix.json results.0.fixed.msToConsensus`)'), [null, null]);
});

test('the checker catches a wrong figure, an unknown file or key, a missing figure and a list of the wrong length', () => {
  const [wrong] = check('here\n\nat a p99 of 212 ms (`fix.json summary.round_p99_ms`)');
  assert.match(wrong!, /^doc\.md:3: `fix\.json summary\.round_p99_ms`: quoted 212 ms, the results hold 360 ms \(359\.6\), after "…here at a p99 of 212 ms"$/);
  assert.match(check('1.10× (`fix.json summary.ratio`)')[0]!, /quoted 1\.10×, the results hold 1\.09×/);
  assert.match(check('81.6% (`fix.json summary.accuracy`)')[0]!, /quoted 81\.6%, the results hold 81\.5%/);
  assert.match(check('15.4, 12.5 s (`fix.json results.fixed.msToConsensus`)')[0]!, /quoted 12\.5 s, the results hold 12\.4 s/);
  assert.match(check('1.09× (`nope.json summary.ratio`)')[0]!, /no bench\/results\/nope\.json/);
  assert.match(check('1.09× (`fix.json summary.ratoi`)')[0]!, /fix\.json has no key summary\.ratoi \(no ratoi under summary\)/);
  assert.match(check('the p99 (`fix.json summary.round_p99_ms`)')[0]!, /no figure right before the citation/);
  assert.match(check('15.4 s (`fix.json results.fixed.msToConsensus`)')[0]!, /quotes 1 figure\(s\) \(15\.4\), the key holds 2/);
  assert.match(check('the worst was ipm (`fix.json summary.attack`)')[0]!, /should end with "sign-flip", the key's value/);
  assert.match(check('figures 1, 2 (`fix.json results`)')[0]!, /holds \{"size":4/);
});

test('key paths: indices, filters, mapping over arrays; units by the key\'s name', () => {
  assert.deepEqual(resolvePath(fixture, 'results.size'), { value: [4, 8] });
  assert.deepEqual(resolvePath(fixture, 'results[size=4].size'), { value: [4] });
  assert.deepEqual(resolvePath(fixture, 'results[size=5]'), { error: 'no [size=5] under results' });
  assert.deepEqual(resolvePath(fixture, 'results[fixed.msToConsensus=12385.3,size=8].size'), { value: [8] });
  assert.deepEqual(resolvePath(fixture, 'summary..ratio'), { error: 'bad path "summary..ratio"' });
  assert.equal(scaleFor('a.round_p99_ms', 's'), 1 / 1000);
  assert.equal(scaleFor('a.msToTarget', 'min'), 1 / 60_000);
  assert.equal(scaleFor('a.duration_s', 'ms'), 1000);
  assert.equal(scaleFor('results[x=1].syncMs.p50', 's'), 1 / 1000);
  assert.equal(scaleFor('a.accuracy', '%'), 100);
  assert.equal(scaleFor('a.server_cpu_percent', '%'), 1);
  assert.equal(scaleFor('a.syncs', 's'), 1, 'a key with no unit in its name is compared as it is');
});

test('results records: a missing or made-up field is reported; a backfilled file may lack only a duration it never had', () => {
  const good = { commit: 'a'.repeat(40), date: '2026-11-28T00:00:00.000Z', command: 'npm run bench -- x', machine: { cores: 2 }, durationMs: 5 };
  assert.deepEqual(missingRecord(good), []);
  assert.deepEqual(missingRecord({ ...good, commit: 'HEAD', durationMs: undefined }), ['commit', 'durationMs']);
  assert.deepEqual(missingRecord({ ...good, durationMs: null }), ['durationMs']);
  assert.deepEqual(missingRecord({ ...good, durationMs: null, provenance: 'backfilled by x: durationMs: the run recorded no duration' }), []);
});
