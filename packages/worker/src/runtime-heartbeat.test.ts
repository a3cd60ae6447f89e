// The runtime sends its status heartbeat as often as the server asks: the period in `welcome`, then
// the one a `heartbeat` event names (from the beat after the one already waiting), within the
// protocol's bounds. The socket is a fake that records the heartbeats; on fake time.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HEARTBEAT_MAX_MS } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import type { Socket } from 'socket.io-client';
import { VolunteerRuntime } from './runtime';

test('heartbeats go at the period the server names, and at a new one once it names another', async () => {
  const clock = new FakeClock();
  const handlers = new Map<string, (payload: unknown) => void>();
  const beats: number[] = [];
  const socket = {
    connected: true,
    on(name: string, fn: (payload: unknown) => void) {
      handlers.set(name, fn);
      return socket;
    },
    emit(name: string) {
      if (name === 'status') beats.push(clock.now());
      return socket;
    },
    disconnect() {
      return socket;
    },
    timeout: () => ({ emitWithAck: async () => ({ ok: true, assigned: true }) }),
  };
  const memory = { microBatch: 1, recompute: false, passes: 1, reason: 'test', predictedPeakBytes: 0, budgetBytes: 0 };
  const engine = { setup: async () => ({ length: 1, memory, stepsPerSync: 1, targetSteps: 1, trainExamples: 1 }) };
  const runtime = new VolunteerRuntime({
    socket: socket as unknown as Socket, serverUrl: 'http://127.0.0.1:1', engine: engine as never, createTransport: () => ({ close() {} }) as never, clock,
  });
  handlers.get('welcome')!({ volunteerId: 'v-1', protocol: 1, serverTime: clock.now(), displayName: null, heartbeatMs: 8_000 });
  handlers.get('job:assign')!({ job: { id: 'job-1', spec: { preset: 'mlp-fashion', strategy: 'localsgd' } }, shard: { index: 0, count: 1 } });
  const t0 = clock.now();
  await clock.advance(24_000);
  assert.deepEqual(beats.map((t) => t - t0), [8_000, 16_000, 24_000]);
  // A longer period from the server: the beat already waiting keeps its time, the next ones follow it.
  handlers.get('heartbeat')!({ ms: 16_000 });
  await clock.advance(48_000);
  assert.deepEqual(beats.map((t) => t - t0), [8_000, 16_000, 24_000, 32_000, 48_000, 64_000]);
  // Past the protocol's bounds: held to them.
  handlers.get('heartbeat')!({ ms: 1e9 });
  await clock.advance(16_000 + 2 * HEARTBEAT_MAX_MS);
  assert.deepEqual(beats.slice(6).map((t) => t - t0), [80_000, 80_000 + HEARTBEAT_MAX_MS, 80_000 + 2 * HEARTBEAT_MAX_MS]);
  runtime.stop();
});

test('while it loads, each heartbeat carries the bytes the engine has downloaded for the job so far', async () => {
  const clock = new FakeClock();
  const handlers = new Map<string, (payload: unknown) => void>();
  const beats: { state: string; downloadedBytes?: number }[] = [];
  const socket = {
    connected: true,
    on(name: string, fn: (payload: unknown) => void) {
      handlers.set(name, fn);
      return socket;
    },
    emit(name: string, payload: { state: string; downloadedBytes?: number }) {
      if (name === 'status') beats.push(payload);
      return socket;
    },
    disconnect() {
      return socket;
    },
    timeout: () => ({ emitWithAck: async () => ({ ok: true, assigned: true }) }),
  };
  // Its setup (the shard download) never ends here; the count is read from the engine's thread, so it may be a promise.
  let downloaded = 0;
  const engine = { setup: () => new Promise(() => {}), downloadedBytes: async () => downloaded };
  const runtime = new VolunteerRuntime({
    socket: socket as unknown as Socket, serverUrl: 'http://127.0.0.1:1', engine: engine as never, createTransport: () => ({ close() {} }) as never, clock,
  });
  handlers.get('welcome')!({ volunteerId: 'v-1', protocol: 1, serverTime: clock.now(), displayName: null, heartbeatMs: 2_000 });
  handlers.get('job:assign')!({ job: { id: 'job-1', spec: { preset: 'mlp-fashion', strategy: 'localsgd' } }, shard: { index: 0, count: 1 } });
  for (const bytes of [65_536, 131_072, 131_072, 400_000]) {
    downloaded = bytes;
    await clock.advance(2_000);
  }
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(beats, [65_536, 131_072, 131_072, 400_000].map((downloadedBytes) => ({ ...beats[0], downloadedBytes })));
  assert.equal(beats[0].state, 'loading');
  assert.equal(runtime.status.downloadedBytes, 400_000, 'the page shows the count too');
  runtime.stop();
});
