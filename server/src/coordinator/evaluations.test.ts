// How a sync's evaluations combine when the evaluators of one model disagree on its accuracy.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ACCURACY_SPREAD, combineEvaluations, type EvaluationReport } from './evaluations';

const of = (...accuracies: number[]) => new Map<string, EvaluationReport>(accuracies.map((a, i) => [`e${i}`, { checksum: 'model', accuracy: a, loss: 1 - a }]));

test('reports of one model within the spread: their lower median, as before', () => {
  const out = combineEvaluations(of(0.8, 0.8 + ACCURACY_SPREAD / 2, 0.8 + ACCURACY_SPREAD), 3);
  assert.ok(out.agreed && out.accuracy === 0.8 + ACCURACY_SPREAD / 2 && !out.accuracyDisputed);
});

test('one report far off: the window of the other two, which are more than half of the evaluators', () => {
  for (const liar of [0.99, 0.01]) {
    const out = combineEvaluations(of(0.8, liar, 0.805), 3);
    assert.ok(out.agreed && out.accuracy === 0.8, `${liar}: ${JSON.stringify(out)}`);
  }
});

test('a window is believed only as the caller says: two with standing, or none and nothing is recorded', () => {
  const standing = new Set(['e0']);
  const believed = (ids: readonly string[]) => ids.filter((id) => standing.has(id)).length >= 2;
  const out = combineEvaluations(of(0.8, 0.99, 0.99), 3, believed);
  assert.ok(out.agreed && out.accuracy === null && out.loss === null && /more than 0.01 apart/.test(out.accuracyDisputed ?? ''), JSON.stringify(out));
  standing.add('e1').add('e2');
  const withStanding = combineEvaluations(of(0.8, 0.99, 0.99), 3, believed);
  assert.ok(withStanding.agreed && withStanding.accuracy === 0.99, 'two with standing in one window set it');
});

test('two windows of two believed: the lower one', () => {
  const out = combineEvaluations(of(0.5, 0.505, 0.9, 0.905), 4, () => true);
  assert.ok(out.agreed && out.accuracy === 0.5, JSON.stringify(out));
});
