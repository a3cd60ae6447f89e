// The heartbeat period a node asks of its volunteers: the fastest while they fit the budget, doubled
// for each doubling past it, capped, so a node's heartbeats stay within its budget up to the cap.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HEARTBEAT_MAX_MS, HEARTBEAT_MIN_MS, HEARTBEATS_PER_SEC, heartbeatPeriodMs } from './heartbeat';

test('the period doubles with each doubling of a node\'s volunteers past its heartbeat budget', () => {
  assert.equal(heartbeatPeriodMs(0), HEARTBEAT_MIN_MS);
  assert.equal(heartbeatPeriodMs(2_000), 2_000, '2,000 tabs every 2 s are the budget of 1,000 a second');
  assert.equal(heartbeatPeriodMs(2_001), 4_000);
  assert.equal(heartbeatPeriodMs(5_000), 8_000);
  assert.equal(heartbeatPeriodMs(10_000), 16_000);
  assert.equal(heartbeatPeriodMs(20_000), 32_000);
  assert.equal(heartbeatPeriodMs(1e9), HEARTBEAT_MAX_MS, 'capped');
  assert.equal(heartbeatPeriodMs(3, 1), 4_000, 'a smaller budget');
  for (let n = 0; n <= 64_000; n += 997) {
    const ms = heartbeatPeriodMs(n);
    assert.ok((n * 1000) / ms <= HEARTBEATS_PER_SEC, `${n} volunteers every ${ms} ms`);
    assert.ok(ms === HEARTBEAT_MIN_MS || (n * 1000) / (ms / 2) > HEARTBEATS_PER_SEC, `${n}: ${ms} ms is not longer than it needs to be`);
  }
  assert.throws(() => heartbeatPeriodMs(10, 0), /a heartbeat budget of 0/);
});
