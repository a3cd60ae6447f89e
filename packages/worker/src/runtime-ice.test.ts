// The runtime gives its transport the ICE servers of the job it was assigned, the renewed ones after
// `ice:refresh` (a refresh for another job is ignored), and none before a job or after it ends. The
// socket is a fake that delivers the server's events (the real path, with coturn relaying the links:
// e2e/turn-relay-in-node.test.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { IceServer } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { VolunteerRuntime } from './runtime';
import { fakeVolunteerSocket } from './testing/fake-socket';

const fakeSocket = () => fakeVolunteerSocket(async () => ({ ok: true, assigned: true }));

const turn = (username: string): IceServer[] => [{ urls: ['stun:127.0.0.1:3478'] }, { urls: ['turn:127.0.0.1:3478'], username, credential: `pw-${username}` }];
const MEMORY = { passes: 1, microBatch: 32, recompute: false, reason: 'test' };

test('links open with the assigned job\'s ICE servers, then the renewed ones, and none outside a job', async () => {
  const clock = new FakeClock();
  const { socket, deliver } = fakeSocket();
  let current: (() => IceServer[]) | null = null;
  const runtime = new VolunteerRuntime({
    socket, serverUrl: 'http://127.0.0.1:1', clock,
    engine: { setup: async () => ({ memory: MEMORY }) } as never,
    createTransport: (_id, _signaler, iceServers) => {
      current = iceServers;
      return { close() {}, connect: async () => {} } as never;
    },
  });
  deliver('welcome', { volunteerId: 'v-1', protocol: 1, serverTime: clock.now(), displayName: null });
  assert.deepEqual(current!(), []);
  deliver('job:assign', { job: { id: 'job-1', spec: { preset: 'mlp-fashion', strategy: 'localsgd' } }, shard: { index: 0, count: 2 }, iceServers: turn('100:v-1') });
  await clock.advance(0);
  assert.deepEqual(current!(), turn('100:v-1'));
  deliver('ice:refresh', { jobId: 'job-1', iceServers: turn('200:v-1') });
  assert.deepEqual(current!(), turn('200:v-1'));
  deliver('ice:refresh', { jobId: 'job-other', iceServers: turn('300:v-1') });
  assert.deepEqual(current!(), turn('200:v-1'), 'a refresh for another job is ignored');
  deliver('job:end', { jobId: 'job-1', reason: 'stopped' });
  await clock.advance(0);
  assert.deepEqual(current!(), []);
  runtime.stop();
});
