import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatBytes, formatCount, formatDuration } from './format';

test('sizes are shown in the unit that fits them', () => {
  const cases: [number, string][] = [
    [0, '0 B'], [999, '999 B'], [1000, '1 kB'], [6_500, '6.5 kB'], [6_549, '6.55 kB'], [203_530, '203.5 kB'],
    [999_949, '999.9 kB'], [999_960, '1 MB'], [814_120, '814.1 kB'], [3_200_000, '3.2 MB'], [782e6, '782 MB'],
    [1.5e9, '1.5 GB'], [2.5e12, '2500 GB'],
  ];
  for (const [n, text] of cases) assert.equal(formatBytes(n), text, `${n}`);
  for (const bad of [-1, NaN, Infinity]) assert.equal(formatBytes(bad), '—');
});

test('durations and counts', () => {
  assert.equal(formatDuration(4_200), '4.2 s');
  assert.equal(formatDuration(45_000), '45 s');
  assert.equal(formatDuration(12 * 60_000), '12 min');
  assert.equal(formatDuration(3.5 * 3_600_000), '3.5 h');
  assert.equal(formatCount(1234567.4), '1,234,567');
});
