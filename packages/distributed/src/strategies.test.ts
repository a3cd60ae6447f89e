// Sync strategies over real Ring collectives on the in-memory transport.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import { gaussianBlobs } from '@tabfleet/data';
import { PRESETS } from '@tabfleet/nn';
import { CpuBackend } from '@tabfleet/tensor';
import { ModelEngine } from './engine';
import { runSyncs, startWorkers, type SimWorker } from './simulate';
import { createStrategy } from './strategies';
import { mlpWorkers } from './workers';

const B = 8, WORKERS = 4, STEPS = 6;
const sgd = { kind: 'sgd' as const, lr: 0.05, momentum: 0.9, nesterov: true };

test('ddp with dense allreduce gives the parameters of one worker training on the 4× batch', async () => {
  const backend = new CpuBackend();
  const data = gaussianBlobs(WORKERS * B * STEPS, 784, 10, 7);
  const test = gaussianBlobs(64, 784, 10, 8);
  // Step s of the big worker reads examples [s·4B, (s+1)·4B); worker k reads the k-th quarter of each.
  const single = new ModelEngine(backend, {
    preset: PRESETS['mlp-fashion'], seed: 3, optimizer: sgd, batchSize: WORKERS * B, train: data, test,
    shard: Int32Array.from({ length: data.count }, (_, i) => i), dataSeed: 0, shuffle: false,
  });
  await single.trainSteps(STEPS);
  const workers: SimWorker[] = Array.from({ length: WORKERS }, (_, k) => {
    const shard = Int32Array.from({ length: STEPS * B }, (_, i) => Math.floor(i / B) * WORKERS * B + k * B + (i % B));
    const engine = new ModelEngine(backend, { preset: PRESETS['mlp-fashion'], seed: 3, optimizer: sgd, batchSize: B, train: data, test, shard, dataSeed: 0, shuffle: false });
    return { id: `w${k}`, engine, strategy: createStrategy(engine, { strategy: 'ddp', H: 1, compression: 'none', outerLr: 0.7, outerMomentum: 0.9 }) };
  });
  await startWorkers(workers);
  const reports = await runSyncs(workers, new MemoryNetwork(), { syncs: STEPS });
  assert.equal(reports.length, STEPS);
  const expected = await single.readParams();
  for (const w of workers) {
    const got = await w.engine.readParams();
    let worst = 0;
    for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i] - expected[i]) / (1e-3 + Math.abs(expected[i])));
    assert.ok(worst < 1e-4, `worker ${w.id}: worst relative difference ${worst}`);
  }
  // Every member ends bit-identical (the ring gives everyone the same mean).
  const first = await workers[0].engine.readParams();
  for (const w of workers.slice(1)) assert.deepEqual(await w.engine.readParams(), first);
  assert.ok(reports.every((r) => r.bytesSent.every((b) => b > 0)));
});

test('an aborted sync is re-run with the same payload and nothing applied twice', async () => {
  const backend = new CpuBackend();
  const data = gaussianBlobs(256, 784, 10, 1);
  const engine = new ModelEngine(backend, {
    preset: PRESETS['mlp-fashion'], seed: 1, optimizer: sgd, batchSize: 16, train: data, test: data, shard: Int32Array.from({ length: 256 }, (_, i) => i), dataSeed: 0,
  });
  const s = createStrategy(engine, { strategy: 'localsgd', H: 2, compression: 'none', outerLr: 0.7, outerMomentum: 0.9 });
  await s.reset();
  await s.local();
  const p1 = await s.payload();
  const before = await engine.readParams();
  const mean = p1.kind === 'dense' ? p1.values.map((x) => x * 0.5) : new Float32Array();
  await s.prepare(mean);
  s.discard(); // round aborted
  assert.deepEqual(await engine.readParams(), before, 'nothing applied');
  assert.equal(await s.payload(), p1, 'the same payload goes into the re-run');
  await s.prepare(mean);
  await s.commit();
  assert.notDeepEqual(await engine.readParams(), before);
  await assert.rejects(() => s.commit(), /without a prepared sync/);
});

const lateJoinCases = [
  {
    name: 'DiLoCo: the outer momentum',
    stateKeys: ['diloco.outer_momentum'],
    optimizer: { kind: 'adamw' as const, lr: 1e-3 },
    strategy: { strategy: 'diloco' as const, H: 2, compression: 'none' as const, outerLr: 0.7, outerMomentum: 0.9 },
  },
  {
    name: 'DDP: the optimizer\'s momentum',
    stateKeys: ['ddp.optimizer.velocity'],
    optimizer: { kind: 'sgd' as const, lr: 0.05, momentum: 0.9 },
    strategy: { strategy: 'ddp' as const, H: 1, compression: 'none' as const, outerLr: 0.7, outerMomentum: 0.9 },
  },
];

for (const c of lateJoinCases) {
  test(`a late joiner takes the global state from the checkpoint and agrees with the others (${c.name})`, async () => {
    const backend = new CpuBackend();
    const data = { train: gaussianBlobs(512, 784, 10, 4), test: gaussianBlobs(64, 784, 10, 5) };
    const job = { workers: 3, data, optimizer: c.optimizer, batchSize: 8, strategy: c.strategy };
    /** Three members after two syncs, the third replaced by a newcomer loaded from the first one's checkpoint. */
    async function withJoiner(keepState: boolean): Promise<SimWorker[]> {
      const members = mlpWorkers(backend, job);
      await startWorkers(members);
      await runSyncs(members, new MemoryNetwork(), { syncs: 2 });
      const bytes = await members[0].engine.checkpoint({}, await members[0].strategy.globalState());
      const joiner = mlpWorkers(backend, { ...job, seed: 99 })[2];
      const state = joiner.engine.loadCheckpoint(bytes);
      assert.deepEqual(Object.keys(state), c.stateKeys);
      joiner.engine.step = members[0].engine.step;
      await joiner.strategy.reset(2, keepState ? state : {});
      return [members[0], members[1], joiner];
    }
    const reports = await runSyncs(await withJoiner(true), new MemoryNetwork(), { syncs: 3 });
    assert.equal(reports.length, 3, 'every member computed the same update');
    await assert.rejects(runSyncs(await withJoiner(false), new MemoryNetwork(), { syncs: 3 }), /members disagree/, 'without that state the joiner would diverge');
  });
}

test('paced ddp: a gradient on micro-batches reads the shard in order across batches, and equals the gradient on those examples', async () => {
  const backend = new CpuBackend();
  const data = gaussianBlobs(128, 784, 10, 5);
  const shard = Int32Array.from({ length: 128 }, (_, i) => i);
  const make = (batchSize: number) => new ModelEngine(backend, { preset: PRESETS['mlp-fashion'], seed: 2, optimizer: sgd, batchSize, train: data, test: data, shard, dataSeed: 0, shuffle: false });
  const paced = make(32);
  const s = createStrategy(paced, { strategy: 'ddp', H: 1, compression: 'none', outerLr: 0.7, outerMomentum: 0.9 });
  await s.reset();
  // 5 micro-batches of 8: the first batch of 32 and 8 examples of the second; then 3: the other 24.
  assert.equal((await s.local(5)).samples, 40);
  const first = await paced.readGradients();
  assert.equal((await s.local(3)).samples, 24);
  const second = await paced.readGradients();
  assert.equal(paced.step, 2, 'one step per gradient');
  // The same examples in batches of 40 and 24 from a plain engine (its batches are in shard order too).
  // Equal up to rounding: the paced engine sums 40 examples as 32 + 8.
  const close = (a: Float32Array, b: Float32Array, what: string) => {
    const worst = a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
    assert.ok(a.length === b.length && worst < 1e-6, `${what}: differs by up to ${worst}`);
  };
  const reference = make(40);
  await reference.computeGradients();
  close(first, await reference.readGradients(), 'examples 0..39');
  const rest = make(8);
  for (let i = 0; i < 5; i++) await rest.computeGradients(); // examples 0..39
  await rest.computeGradients(24); // 40..63
  close(second, await rest.readGradients(), 'examples 40..63');
  // Another order of examples gives another gradient: the check can fail.
  const shifted = make(8);
  await shifted.computeGradients(24);
  const other = await shifted.readGradients();
  assert.ok(other.some((v, i) => Math.abs(v - second[i]) > 1e-4));
  await assert.rejects(s.local(0), /whole number of micro-batches/);
});
