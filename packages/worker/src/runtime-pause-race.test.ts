// A pause that lands while the tab's `round:ready` is on its way: the server's answer, even one that
// says "syncs went on without you, reload", must not move the held tab out of 'paused'. (In a fresh
// clone's suite the embed widget's Pause left the tab 'loading' for 30 s: the answer came back as
// `reload` after the hold and overwrote the state.) The socket and the engine are fakes that answer
// as told; the runtime is the real one.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Assignment } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { VolunteerRuntime, type EngineLike } from './runtime';
import { fakeVolunteerSocket } from './testing/fake-socket';

function fakeSocket() {
  let answerReady: ((ack: object) => void) | null = null;
  let readySent: () => void = () => {};
  const { socket, deliver } = fakeVolunteerSocket((name) => {
    if (name === 'work:request') return new Promise(() => {}); // the assignment is sent by the test
    if (name === 'model:loaded') return Promise.resolve({ ok: true, admitted: true });
    if (name !== 'round:ready') return Promise.resolve({ ok: true });
    readySent();
    return new Promise((r) => (answerReady = r));
  });
  return {
    socket,
    readySent: new Promise<void>((resolve) => (readySent = resolve)),
    send: deliver,
    answerReady: (ack: object) => answerReady!(ack),
  };
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

test('a pause while round:ready is answered keeps the tab paused, even when the answer says reload', async () => {
  const clock = new FakeClock();
  const fake = fakeSocket();
  const runtime = new VolunteerRuntime({ socket: fake.socket, serverUrl: 'http://127.0.0.1:1', engine, createTransport: () => ({ close() {} }) as never, clock });
  fake.send('welcome', { volunteerId: 'v-1', protocol: 1, serverTime: clock.now(), displayName: null });
  fake.send('job:assign', assignment);
  fake.send('model:load', { jobId: 'job-1', seq: 0, step: 0, url: null });
  await fake.readySent;
  assert.equal(runtime.status.state, 'syncing', 'trained and said it is ready');

  await runtime.pause();
  assert.equal(runtime.status.state, 'paused');
  fake.answerReady({ ok: true, reload: true });
  await clock.advance(10);
  assert.deepEqual([runtime.status.state, runtime.status.held, runtime.status.jobId], ['paused', ['paused'], null], 'still paused after the answer');
  runtime.stop();
});
