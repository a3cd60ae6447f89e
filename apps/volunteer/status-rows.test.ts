// The volunteer page's status table: while the tab loads, what it has downloaded so far (a load over a
// slow link can take minutes); not once it trains.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RuntimeStatus } from '@tabfleet/worker/runtime';
import { statusRows } from './contribution';

const status = (patch: Partial<RuntimeStatus>): RuntimeStatus => ({
  state: 'loading', held: [], hidden: false, volunteerId: 'v-1', jobId: 'job-1', step: 0, seq: 0, roundId: null, peers: [], samplesPerSec: 0,
  bytesSent: 0, bytesReceived: 0, syncs: 0, lastError: null, lastAccuracy: null, memoryPlan: null, downloadedBytes: null, ...patch,
});

test('a loading tab shows the bytes downloaded so far, a training one does not', () => {
  const downloaded = (s: RuntimeStatus) => statusRows(s, undefined).find(([k]) => k === 'downloaded so far')?.[1];
  assert.equal(downloaded(status({})), undefined, 'nothing counted yet');
  assert.match(downloaded(status({ downloadedBytes: 12_400_000 }))!, /^12(\.\d)? MB$/);
  assert.equal(downloaded(status({ state: 'training', downloadedBytes: 12_400_000 })), undefined);
});
