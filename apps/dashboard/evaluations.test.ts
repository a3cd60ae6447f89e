import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { MetricPoint } from '@tabfleet/protocol';
import { evaluationsBySync } from './evaluations';

const point = (seq: number, accuracy: number | null): MetricPoint => ({ seq, step: 8 * seq, time: 0, loss: 1, accuracy, samplesPerSec: null, bytesSent: null, workers: 2 });

test('evaluations go by sync: one recorded after a newer sync\'s is not the latest', () => {
  // As a slow evaluator left them: sync 12's recorded after sync 38's (the dashboard showed 76.85% at a job's 0.82 target).
  const arrived = [point(12, null), point(25, 0.81), point(38, 0.83), point(12, 0.77), point(39, null)];
  assert.deepEqual(evaluationsBySync(arrived).map((p) => [p.seq, p.accuracy]), [[12, 0.77], [25, 0.81], [38, 0.83]]);
  assert.equal(evaluationsBySync(arrived).at(-1)?.accuracy, 0.83);
  assert.deepEqual(evaluationsBySync([point(3, null)]), []);
});
