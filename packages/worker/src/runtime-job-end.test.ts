// A job the server ends while the tab still works on it (it was evicted for a load that took too
// long): what then fails of the work queued before the end is logged, not shown as the tab's error.
// Seen in the eight-volunteer e2e on a loaded machine: the shard download refused after the eviction,
// then the model load with no job set up, left the tab's lastError set after it rejoined and trained.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeClock } from '@tabfleet/protocol/testing';
import { VolunteerRuntime } from './runtime';
import { fakeVolunteerSocket } from './testing/fake-socket';

const assignment = { job: { id: 'job-1', spec: { preset: 'mlp-fashion', strategy: 'localsgd' } }, shard: { index: 0, count: 1 } };
const modelLoad = { jobId: 'job-1', seq: 0, step: 0, url: null };

/** A runtime whose engine's setup waits for `failSetup`, then fails as a refused download does. */
function loadingRuntime() {
  const clock = new FakeClock();
  const { socket, deliver } = fakeVolunteerSocket(async (name) => (name === 'work:request' ? { ok: true, assigned: false } : { ok: true }));
  let failSetup!: () => void;
  const setupFailed = new Promise<void>((resolve) => (failSetup = resolve));
  const engine = {
    setup: async () => {
      await setupFailed;
      throw new Error('GET /datasets/fashion-mnist/shards/0/1: HTTP 403 not a member of job job-1');
    },
    loadModel: async () => {
      throw new Error('no job set up: call setup() first');
    },
    downloadedBytes: () => 0,
  };
  const logs: string[] = [];
  const runtime = new VolunteerRuntime({
    socket, serverUrl: 'http://127.0.0.1:1', engine: engine as never, createTransport: () => ({ close() {} }) as never, clock,
    log: (l) => logs.push(l),
  });
  deliver('welcome', { volunteerId: 'v-1', protocol: 1, serverTime: clock.now(), displayName: null });
  deliver('job:assign', assignment);
  deliver('model:load', modelLoad);
  return { runtime, deliver, failSetup, logs, clock };
}

test('the work of a job the server ended fails quietly: logged, not the tab\'s last error', async () => {
  const { runtime, deliver, failSetup, logs, clock } = loadingRuntime();
  deliver('job:end', { jobId: 'job-1', reason: 'model load timed out' });
  failSetup();
  await clock.advance(10);
  assert.ok(logs.some((l) => /job:assign: GET .*403/.test(l)), logs.join('\n'));
  assert.ok(logs.some((l) => /job job-1 ended: model load timed out/.test(l)), logs.join('\n'));
  assert.equal(runtime.status.lastError, null);
  runtime.stop();
});

test('the same failure in a job still running is the tab\'s last error', async () => {
  const { runtime, failSetup, clock } = loadingRuntime();
  failSetup();
  await clock.advance(10);
  assert.match(runtime.status.lastError ?? '', /^model:load: no job set up/);
  runtime.stop();
});
