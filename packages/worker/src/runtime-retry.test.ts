// The runtime asks for work again after a passing failure (a server error, no answer: the job's
// server node went away and another is adopting it), and not after a refusal for cause. The socket is
// a fake that answers `work:request` as told (fault injection); the real path is
// bench/soak/node-kill.test.ts, whose simulated volunteers ask again the same way. On fake time: the
// retry comes exactly RETRY_MS later, however busy the machine.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeClock } from '@tabfleet/protocol/testing';
import type { Socket } from 'socket.io-client';
import { VolunteerRuntime } from './runtime';
import { fakeVolunteerSocket } from './testing/fake-socket';

function fakeSocket(clock: FakeClock, answers: object[]) {
  const requests: number[] = [];
  const { socket, deliver } = fakeVolunteerSocket(async (name) => {
    if (name !== 'work:request') return { ok: true };
    requests.push(clock.now());
    const answer = answers.shift();
    if (!answer) return new Promise(() => {}); // never answers
    return answer;
  });
  const welcome = () => deliver('welcome', { volunteerId: 'v-1', protocol: 1, serverTime: clock.now(), displayName: null });
  return { socket, requests, welcome };
}

const RETRY_MS = 300;
const runtimeOn = (socket: Socket, clock: FakeClock) =>
  new VolunteerRuntime({ socket, serverUrl: 'http://127.0.0.1:1', engine: {} as never, createTransport: () => ({ close() {} }) as never, workRetryMs: RETRY_MS, clock });

test('a work request that fails with a server error is sent again; a refusal for cause is not', async () => {
  const clock = new FakeClock();
  const failing = fakeSocket(clock, [{ ok: false, error: { code: 'internal', message: 'node-a did not answer' } }, { ok: true, assigned: false }]);
  const r = runtimeOn(failing.socket, clock);
  failing.welcome();
  await clock.advance(RETRY_MS - 1);
  assert.equal(failing.requests.length, 1, 'not asked again before the retry time');
  await clock.advance(1);
  assert.deepEqual(failing.requests.map((t) => t - failing.requests[0]), [0, RETRY_MS], 'asked again once, RETRY_MS later');
  await clock.advance(10 * RETRY_MS);
  assert.equal(failing.requests.length, 2, 'then waited to be offered work');
  r.stop();

  const refused = fakeSocket(clock, [{ ok: false, error: { code: 'unknown_job', message: 'no job job-x' } }]);
  const r2 = runtimeOn(refused.socket, clock);
  refused.welcome();
  await clock.advance(10 * RETRY_MS);
  assert.equal(refused.requests.length, 1);
  assert.match(r2.status.lastError ?? '', /no job job-x/);
  r2.stop();
});
