// On the CPU backend a readback is an already-resolved promise, so the engine's loops would run as one
// block and starve the process's sockets (pings) and timers. The engine lets the event loop run
// between steps and between evaluation batches; counted here in turns of it, not in milliseconds.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { gaussianBlobs, type Dataset } from '@tabfleet/data';
import { PRESETS } from '@tabfleet/nn';
import { CpuBackend } from '@tabfleet/tensor';
import { ModelEngine } from './engine';

const all = gaussianBlobs(1024 + 2000, 784, 10, 3);
const train: Dataset = { ...all, count: 1024 };
const testSet: Dataset = { ...all, x: all.x.subarray(1024 * 784), y: all.y.subarray(1024), count: 2000 };

function engine(): ModelEngine {
  return new ModelEngine(new CpuBackend('f32'), {
    preset: PRESETS['mlp-fashion'], seed: 1, optimizer: { kind: 'sgd', lr: 0.05 }, batchSize: 32, train, test: testSet,
    shard: Int32Array.from({ length: 1024 }, (_, i) => i), dataSeed: 1,
  });
}

/** How many times a macrotask (a message, as a socket's data would arrive) got to run while `work` ran. */
async function turnsDuring(work: () => Promise<unknown>): Promise<number> {
  let turns = 0, running = true;
  const channel = new MessageChannel();
  channel.port1.onmessage = () => {
    turns++;
    if (running) channel.port2.postMessage(null);
  };
  channel.port2.postMessage(null);
  await work();
  running = false;
  channel.port1.close();
  return turns;
}

test('an evaluation lets the event loop run between its batches', async () => {
  const e = engine();
  // 2,000 examples in batches of 500: three boundaries between them.
  const turns = await turnsDuring(() => e.evaluate(Infinity, 500));
  assert.ok(turns >= 3, `${turns} turns of the event loop during an evaluation of 4 batches`);
});

test('local steps let the event loop run between them', async () => {
  const e = engine();
  const turns = await turnsDuring(() => e.trainSteps(4));
  assert.ok(turns >= 3, `${turns} turns of the event loop during 4 steps`);
});
