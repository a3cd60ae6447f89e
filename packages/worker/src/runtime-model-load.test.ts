// A tab on a slow link is sent a newer model while it loads one (a sync committed meanwhile). Before,
// it finished the old load, reported it, and the server refused the report ("was not asked to load the
// model of sync 2"): the tab showed that as its error. Now the old load is not reported (a download
// under way is abandoned), and the newer one is loaded and reported.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeClock } from '@tabfleet/protocol/testing';
import { VolunteerRuntime } from './runtime';
import { fakeVolunteerSocket } from './testing/fake-socket';

const assignment = { job: { id: 'job-1', spec: { preset: 'mlp-fashion', strategy: 'localsgd' } }, shard: { index: 0, count: 1 } };

/**
 * A runtime assigned job-1 whose engine's loads wait for the test (`done`, or `abandon` to reject);
 * with `abandonable`, the engine's abandonModelLoad rejects the latest load as JobEngine's does.
 * The server answers a report of sync 3's model with "not admitted", of another with a refusal.
 */
function joiningRuntime(abandonable: boolean) {
  const clock = new FakeClock();
  const reported: number[] = [];
  const { socket, deliver } = fakeVolunteerSocket(async (name, payload) => {
    if (name === 'model:loaded') {
      const { seq } = payload as { seq: number };
      reported.push(seq);
      // The server's answer to a stale report (model-loads.ts).
      if (seq !== 3) return { ok: false, error: { code: 'stale_round', message: `was not asked to load the model of sync ${seq}` } };
      return { ok: true, admitted: false };
    }
    return name === 'work:request' ? { ok: true, assigned: false } : { ok: true };
  });
  const loads: { url: string | null; done: () => void; abandon: () => void }[] = [];
  const engine = {
    setup: async () => ({ memory: { passes: 1, microBatch: 32, recompute: false, reason: 'test' } }),
    loadModel: (url: string | null) => new Promise<{ digest: string }>((resolve, reject) => {
      loads.push({ url, done: () => resolve({ digest: `digest of ${url}` }), abandon: () => reject(new Error('abandoned')) });
    }),
    ...(abandonable ? { abandonModelLoad: () => loads.at(-1)?.abandon() } : {}),
    downloadedBytes: () => 0,
  };
  const logs: string[] = [];
  const runtime = new VolunteerRuntime({
    socket, serverUrl: 'http://127.0.0.1:1', engine: engine as never, createTransport: () => ({ close() {} }) as never, clock, log: (l) => logs.push(l),
  });
  deliver('welcome', { volunteerId: 'v-1', protocol: 1, serverTime: clock.now(), displayName: null });
  deliver('job:assign', assignment);
  return { clock, deliver, reported, loads, logs, runtime };
}

test('a model load the server superseded is not reported; the newer one is', async () => {
  const { clock, deliver, reported, loads, logs, runtime } = joiningRuntime(false);
  deliver('model:load', { jobId: 'job-1', seq: 2, step: 2, url: '/checkpoints/2' });
  await clock.advance(10);
  assert.deepEqual(loads.map((l) => l.url), ['/checkpoints/2'], logs.join('\n'));
  // Sync 3 commits while it loads: the server sends that model (twice over: one more is queued, then superseded too).
  deliver('model:load', { jobId: 'job-1', seq: 3, step: 3, url: '/checkpoints/3?old' });
  deliver('model:load', { jobId: 'job-1', seq: 3, step: 3, url: '/checkpoints/3' });
  loads[0].done();
  await clock.advance(10);
  assert.deepEqual(loads.map((l) => l.url), ['/checkpoints/2', '/checkpoints/3'], 'the queued older load is skipped');
  loads[1].done();
  await clock.advance(10);
  assert.deepEqual(reported, [3], 'only the newest load is reported');
  assert.equal(runtime.status.lastError, null, logs.join('\n'));
  assert.ok(logs.some((l) => /loaded the model of sync 2, now superseded/.test(l)), logs.join('\n'));
  runtime.stop();
});

test('a download from the server that a newer model:load makes stale is abandoned, not reported; the newer one is loaded', async () => {
  const { clock, deliver, reported, loads, logs, runtime } = joiningRuntime(true);
  deliver('model:load', { jobId: 'job-1', seq: 2, step: 2, url: '/checkpoints/2' });
  await clock.advance(10);
  deliver('model:load', { jobId: 'job-1', seq: 3, step: 3, url: '/checkpoints/3' });
  await clock.advance(10);
  assert.deepEqual(loads.map((l) => l.url), ['/checkpoints/2', '/checkpoints/3'], 'the newer load begins without waiting for the older download');
  loads[1].done();
  await clock.advance(10);
  assert.deepEqual(reported, [3]);
  assert.equal(runtime.status.lastError, null, logs.join('\n'));
  assert.ok(logs.some((l) => /the model of sync 2 is not loaded: the server sent a newer one/.test(l)), logs.join('\n'));
  runtime.stop();
});
