// A pause that lands after the tab's `round:ready` went: the server's word, even "syncs went on
// without you, reload" (`work:dropped`, then `model:load`), or the round it began before it heard
// the tab leave (`round:begin`), must not move the held tab out of 'paused'. (In a fresh clone's
// suite the embed widget's Pause left the tab 'loading' for 30 s: the ready's answer, then an ack,
// came back as `reload` after the hold and overwrote the state. In CI it left the tab 'syncing': a
// round:begin after the hold ran its round.) The socket and the engine are fakes that answer as told;
// the runtime is the real one.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Assignment } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { VolunteerRuntime, type EngineLike } from './runtime';
import { fakeVolunteerSocket } from './testing/fake-socket';

function fakeSocket() {
  const fake = fakeVolunteerSocket(async (name) => {
    if (name === 'work:request') return new Promise(() => {}); // the assignment is sent by the test
    if (name === 'model:loaded') return { ok: true, admitted: true };
    return { ok: true };
  });
  return { socket: fake.socket, send: fake.deliver, sent: fake.sent, readySent: () => fake.sent.some((e) => e.name === 'round:ready') };
}

const engine = {
  setup: async () => ({ memory: { passes: 1, microBatch: 32, recompute: false, reason: 'fits' }, targetSteps: 1_000, stepsPerSync: 4 }),
  loadModel: async () => ({ digest: 'd0' }),
  local: async () => ({ steps: 4, samples: 128 }),
  payload: async () => ({ kind: 'dense', values: new Float32Array(4) }),
  currentStep: () => 4,
} as unknown as EngineLike;

const assignment = {
  job: { id: 'job-1', spec: { preset: 'mlp-fashion', strategy: 'localsgd', overlapSteps: 0 } },
  shard: { index: 0, count: 2 },
} as unknown as Assignment;

/** A runtime that joined the job, trained and sent `round:ready`. */
async function readyRuntime() {
  const clock = new FakeClock();
  const fake = fakeSocket();
  const runtime = new VolunteerRuntime({ socket: fake.socket, serverUrl: 'http://127.0.0.1:1', engine, createTransport: () => ({ close() {} }) as never, clock });
  fake.send('welcome', { volunteerId: 'v-1', protocol: 1, serverTime: clock.now(), displayName: null });
  fake.send('job:assign', assignment);
  fake.send('model:load', { jobId: 'job-1', seq: 0, step: 0, url: null });
  for (let i = 0; i < 20 && !fake.readySent(); i++) await clock.advance(1);
  assert.ok(fake.readySent(), 'trained and said it is ready');
  assert.equal(runtime.status.state, 'syncing');
  return { clock, fake, runtime };
}

test('a pause after round:ready keeps the tab paused, even when the server then says its work was dropped', async () => {
  const { clock, fake, runtime } = await readyRuntime();

  await runtime.pause();
  assert.equal(runtime.status.state, 'paused');
  fake.send('work:dropped', { jobId: 'job-1', seq: 1 });
  fake.send('model:load', { jobId: 'job-1', seq: 1, step: 4, url: null });
  await clock.advance(10);
  assert.deepEqual([runtime.status.state, runtime.status.held, runtime.status.jobId], ['paused', ['paused'], null], 'still paused after the answer');
  runtime.stop();
});

test('a round the server began before it heard the pause is not run: the tab stays paused and sends nothing for it', async () => {
  const { clock, fake, runtime } = await readyRuntime();
  await runtime.pause();
  const sentAtPause = fake.sent.length;
  fake.send('round:begin', { jobId: 'job-1', roundId: 1, seq: 1, members: ['v-1', 'v-2'], mode: 'ring', evaluators: [], uploader: null });
  await clock.advance(10);
  assert.deepEqual([runtime.status.state, runtime.status.roundId, runtime.status.peers], ['paused', null, []], 'still paused, in no round');
  assert.deepEqual(fake.sent.slice(sentAtPause).map((e) => e.name).filter((n) => n.startsWith('round:')), [], 'no round event for a round it left');
  fake.send('round:commit', { jobId: 'job-1', roundId: 1, seq: 1, step: 4 });
  await clock.advance(10);
  assert.deepEqual([runtime.status.state, runtime.status.syncs], ['paused', 0], 'its commit is not applied');
  runtime.stop();
});
