// `round:ready` and `round:result` go without an ack (a node of thousands answers two frames fewer
// per member and round): a refusal comes back as `protocol:error`, logged with the event it refused
// (a refused ready is the tab's error), and dropped work as `work:dropped`. The socket and the engine
// are fakes; the runtime is the real one, through a star round.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Assignment, RoundBegin } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { VolunteerRuntime, type EngineLike } from './runtime';
import { fakeVolunteerSocket } from './testing/fake-socket';

const engine = {
  setup: async () => ({ memory: { passes: 1, microBatch: 32, recompute: false, reason: 'fits' }, targetSteps: 1_000, stepsPerSync: 4 }),
  loadModel: async () => ({ digest: 'd0' }),
  local: async () => ({ steps: 4, samples: 128, loss: 0.5 }),
  payload: async () => ({ kind: 'dense', values: new Float32Array(4) }),
  currentStep: () => 4,
  prepare: async () => 'c'.repeat(32),
} as unknown as EngineLike;

const assignment = {
  job: { id: 'job-1', spec: { preset: 'mlp-fashion', strategy: 'localsgd', overlapSteps: 0 } },
  shard: { index: 0, count: 1 },
} as unknown as Assignment;

/** A runtime that has trained its first unit and sent round:ready; `asked`: the events it wanted an ack for. */
async function readyRuntime() {
  const clock = new FakeClock();
  const asked: string[] = [];
  const fake = fakeVolunteerSocket(async (name) => {
    asked.push(name);
    if (name === 'work:request') return new Promise(() => {}); // the assignment is sent by the test
    if (name === 'model:loaded') return { ok: true, admitted: true };
    return { ok: true };
  });
  const logs: string[] = [];
  const runtime = new VolunteerRuntime({
    socket: fake.socket, serverUrl: 'http://127.0.0.1:1', engine, createTransport: () => ({ close() {} }) as never, clock, log: (l) => logs.push(l),
  });
  fake.deliver('welcome', { volunteerId: 'v-1', protocol: 1, serverTime: clock.now(), displayName: null });
  fake.deliver('job:assign', assignment);
  fake.deliver('model:load', { jobId: 'job-1', seq: 0, step: 0, url: null });
  for (let i = 0; i < 20 && !fake.sent.some((e) => e.name === 'round:ready'); i++) await clock.advance(1);
  return { clock, asked, fake, logs, runtime };
}

test('round:ready and round:result are sent without an ack, and a refused result (protocol:error) is logged', async () => {
  const { clock, asked, fake, logs, runtime } = await readyRuntime();
  assert.deepEqual(fake.sent.filter((e) => e.name === 'round:ready').map((e) => e.payload), [{ jobId: 'job-1', seq: 1, step: 4 }]);

  const begin: RoundBegin = {
    jobId: 'job-1', roundId: 7, seq: 1, members: ['v-1'], mode: 'star', began: clock.now(), deadline: clock.now() + 60_000, uploader: null, quorum: 1, evaluators: [],
  };
  fake.deliver('round:begin', begin);
  await clock.advance(10);
  assert.ok(asked.includes('star:update'), `the star update went up: ${asked.join(', ')}`);
  fake.deliver('star:result', { jobId: 'job-1', roundId: 7, data: new Uint8Array(16) });
  await clock.advance(10);

  const results = fake.sent.filter((e) => e.name === 'round:result');
  assert.equal(results.length, 1, `one round:result, sent without an ack: ${fake.sent.map((e) => e.name).join(', ')}`);
  assert.equal((results[0].payload as { roundId: number }).roundId, 7);
  assert.deepEqual(asked.filter((n) => n.startsWith('round:')), [], 'no ack asked for a round event');

  fake.deliver('protocol:error', { event: 'round:result', code: 'conflict', message: 'the star result has not been sent yet' });
  assert.ok(logs.some((l) => l.endsWith('round:result refused: conflict: the star result has not been sent yet')), logs.join('\n'));
  assert.equal(runtime.status.lastError, null, 'a refused result is logged, as its ack was');
  runtime.stop();
});

test('a refused round:ready is the tab\'s error, unless the job has ended (not_member)', async () => {
  const { fake, runtime } = await readyRuntime();
  fake.deliver('protocol:error', { event: 'round:ready', code: 'not_member', message: 'not a member of job job-1' });
  assert.equal(runtime.status.lastError, null);
  fake.deliver('protocol:error', { event: 'round:ready', code: 'stale_round', message: 'the next sync is 3, not 1' });
  assert.equal(runtime.status.lastError, 'round:ready refused: stale_round: the next sync is 3, not 1');
  runtime.stop();
});

test('work:dropped: the tab says so and shows it is loading the job\'s model', async () => {
  const { fake, logs, runtime } = await readyRuntime();
  assert.equal(runtime.status.state, 'syncing');
  fake.deliver('work:dropped', { jobId: 'job-1', seq: 1 });
  assert.equal(runtime.status.state, 'loading');
  assert.ok(logs.some((l) => l.endsWith('sync 1 went on without this tab: reloading the job\'s model')), logs.join('\n'));
  runtime.stop();
});
