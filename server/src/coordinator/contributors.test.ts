// The contributor ledger's writes: joins within a second, credit within 10 s, heartbeat reports at most
// every 30 s or with the next credit, so a job of thousands of heartbeating tabs does not rewrite its
// rows each second, nor a job of fast rounds each sync.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { capabilitiesSchema } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import type { ContributorRecord } from '../store/store';
import { SIM_CAPABILITIES } from '../testing/sim-volunteer';
import { ContributorLedger } from './contributors';

const capabilities = capabilitiesSchema.parse(SIM_CAPABILITIES);

test('a heartbeat is written within 30 s or with the next credit; a credit within 10 s, batched', async () => {
  const clock = new FakeClock();
  const writes: ContributorRecord[][] = [];
  const ledger = new ContributorLedger('job-t', clock, (records) => writes.push(records));
  ledger.joined({ identity: 'a', volunteerId: 'v-a', capabilities });
  await clock.advance(1_000);
  assert.equal(writes.length, 1, 'the join is written within a second');

  ledger.reported('a', 'v-a', { step: 5, bytesSent: 10, bytesReceived: 20 });
  await clock.advance(29_000);
  assert.equal(writes.length, 1, 'a heartbeat alone waits');
  await clock.advance(1_000);
  assert.equal(writes.length, 2, 'and is written within 30 s');
  assert.equal(writes[1][0].step, 5);

  ledger.reported('a', 'v-a', { step: 9, bytesSent: 30, bytesReceived: 40 });
  await clock.advance(2_000);
  ledger.credit('a', 32, 100, clock.now());
  await clock.advance(5_000);
  ledger.credit('a', 32, 100, clock.now());
  await clock.advance(4_000);
  assert.equal(writes.length, 2, 'credits wait');
  await clock.advance(1_000);
  assert.equal(writes.length, 3, 'a credit brings the write forward: both syncs in one write, 10 s after the first');
  assert.deepEqual([writes[2][0].syncs, writes[2][0].step, writes[2][0].bytesSent], [2, 9, 30], 'with the heartbeat in it');
  await clock.advance(60_000);
  assert.equal(writes.length, 3, 'nothing left to write');
});
