import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jobSpecSchema, type MetricPoint } from '@tabfleet/protocol';
import { comparedIds, curvesOf, differingSettings } from './compare-data';

const sync = (seq: number, step: number, time: number, loss: number, workers: number): MetricPoint =>
  ({ seq, step, time, loss, accuracy: null, samplesPerSec: 100, bytesSent: 10, workers });
const evaluation = (seq: number, step: number, time: number, accuracy: number): MetricPoint =>
  ({ seq, step, time, loss: 0.5, accuracy, samplesPerSec: null, bytesSent: null, workers: 2 });

// Two syncs of 4 steps (2 members, then 3), an evaluation of the second, given out of order.
const points = [evaluation(2, 8, 9_000, 0.7), sync(2, 8, 7_000, 1.5, 3), sync(1, 4, 5_000, 2, 2)];
const spec = { hyperparameters: { batchSize: 10 } };

test('curves by step keep the training loss and the evaluations apart, in step order', () => {
  const c = curvesOf(points, spec, 'step');
  assert.deepEqual(c.loss, [{ x: 4, y: 2 }, { x: 8, y: 1.5 }]);
  assert.deepEqual(c.accuracy, [{ x: 8, y: 0.7 }]);
});

test('samples count each sync\'s new steps times the batch times its members', () => {
  const c = curvesOf(points, spec, 'samples');
  // 4 steps · 10 · 2 members, then 4 more · 10 · 3 members.
  assert.deepEqual(c.loss.map((p) => p.x), [80, 200]);
  assert.deepEqual(c.accuracy.map((p) => p.x), [200]);
});

test('wall time counts seconds from the job\'s first point', () => {
  const c = curvesOf(points, spec, 'time');
  assert.deepEqual(c.loss.map((p) => p.x), [0, 2]);
  assert.deepEqual(c.accuracy.map((p) => p.x), [4]);
});

test('the settings table names only the fields that differ, with each job\'s value', () => {
  const base = { preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', hyperparameters: { lr: 0.1, batchSize: 32 }, targetSteps: 100 } as const;
  const a = jobSpecSchema.parse({ ...base, H: 2 });
  const b = jobSpecSchema.parse({ ...base, H: 4, hyperparameters: { lr: 0.05, batchSize: 32 }, name: 'b' });
  const d = differingSettings([a, b]);
  assert.deepEqual(d.fields, ['H', 'hyperparameters.lr', 'name']);
  assert.deepEqual(d.values, [['2', '0.1', '—'], ['4', '0.05', 'b']]);
  assert.deepEqual(differingSettings([a, b], ['name']).fields, ['H', 'hyperparameters.lr']);
  assert.deepEqual(differingSettings([a, a]).fields, []);
});

test('the compare address names jobs once each, up to the limit', () => {
  assert.deepEqual(comparedIds('#/compare/a,b,a,c', 2), ['a', 'b']);
  assert.equal(comparedIds('#/jobs/a', 2), null);
  assert.deepEqual(comparedIds('#/compare/', 2), []);
});
