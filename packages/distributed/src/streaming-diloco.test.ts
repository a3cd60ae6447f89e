// Streaming DiLoCo over real Ring collectives on the in-memory transport: one fragment is plain
// DiLoCo to the bit; two fragments take turns, each sync sending its fragment's bytes only, members
// agreeing on every sync while their parameters carry local progress; an E2M1 fragment sends its
// encoding; and the overlap merges a synced fragment into the parameters τ steps later, exactly.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import { gaussianBlobs } from '@tabfleet/data';
import { checksumOf, gatherFragment, modelFragments, PRESET_LAYOUTS, quantizedBytes } from '@tabfleet/protocol';
import { CpuBackend } from '@tabfleet/tensor';
import { runSyncs, startWorkers } from './simulate';
import type { CompressionName, StrategyOptions } from './strategies';
import { mlpWorkers } from './workers';

const WORKERS = 4;
const layout = PRESET_LAYOUTS['mlp-fashion'];

function workers(compression: CompressionName, streaming?: StrategyOptions['streaming'], lr = 2e-4) {
  const blobs = gaussianBlobs(2048, 784, 10, 11);
  return mlpWorkers(new CpuBackend(), {
    workers: WORKERS, data: { train: blobs, test: blobs }, batchSize: 16, seed: 5, optimizer: { kind: lr ? 'adamw' : 'sgd', lr },
    strategy: { strategy: 'diloco', H: 4, compression, outerLr: 0.7, outerMomentum: 0.9, streaming },
  });
}

test('one fragment without overlap is plain DiLoCo, sync for sync', async () => {
  const plain = workers('none');
  const streamed = workers('none', { fragments: modelFragments(layout, 1), overlapSteps: 0, mixing: 0 });
  await startWorkers(plain);
  await startWorkers(streamed);
  const a = await runSyncs(plain, new MemoryNetwork({ seed: 1 }), { syncs: 3 });
  const b = await runSyncs(streamed, new MemoryNetwork({ seed: 1 }), { syncs: 3 });
  assert.deepEqual(b.map((r) => r.checksum), a.map((r) => r.checksum));
  assert.equal(checksumOf(streamed[0].strategy.globalModel!()), checksumOf(await plain[0].engine.readParams()));
});

test('two fragments take turns: each sync sends one fragment, and the global model is every fragment\'s last sync', async () => {
  const fragments = modelFragments(layout, 2);
  const ws = workers('none', { fragments, overlapSteps: 0, mixing: 0 });
  await startWorkers(ws);
  const initial = await ws[0].engine.readParams();
  const reports = await runSyncs(ws, new MemoryNetwork({ seed: 1 }), { syncs: 4 });
  // Dense ring allreduce: 2(N−1)/N of the vector at 4 bytes, headers aside.
  for (const r of reports) {
    const length = fragments[(r.seq - 1) % 2].length;
    const floor = ((2 * (WORKERS - 1)) / WORKERS) * length * 4;
    assert.ok(r.bytesSent[0] >= floor && r.bytesSent[0] < floor * 1.05, `sync ${r.seq}: ${r.bytesSent[0]} bytes for a fragment of ${length} values`);
  }
  // Every member holds one global model. The last sync wrote fragment 1 into the parameters; fragment 0
  // was synced the sync before and carries the last round's local steps since.
  const global = ws[0].strategy.globalModel!();
  for (const w of ws) assert.equal(checksumOf(w.strategy.globalModel!()), checksumOf(global));
  const params = await ws[0].engine.readParams();
  assert.deepEqual(gatherFragment(params, fragments[1]), gatherFragment(global, fragments[1]));
  assert.notDeepEqual(gatherFragment(params, fragments[0]), gatherFragment(global, fragments[0]));
  for (const f of fragments) assert.notDeepEqual(gatherFragment(global, f), gatherFragment(initial, f), 'every fragment moved');
  assert.ok(reports.at(-1)!.loss < reports[0].loss, `loss ${reports[0].loss} → ${reports.at(-1)!.loss}`);
});

test('E2M1 fragments send their encoding, with error feedback kept per fragment', async () => {
  const fragments = modelFragments(layout, 2);
  const ws = workers('e2m1', { fragments, overlapSteps: 0, mixing: 0 });
  await startWorkers(ws);
  const reports = await runSyncs(ws, new MemoryNetwork({ seed: 1 }), { syncs: 4 });
  for (const r of reports) {
    const floor = quantizedBytes(fragments[(r.seq - 1) % 2].length, 'e2m1') * (WORKERS - 1);
    assert.ok(r.bytesSent[0] >= floor && r.bytesSent[0] < floor * 1.05, `sync ${r.seq}: ${r.bytesSent[0]} bytes, the encoding's floor ${floor}`);
  }
  assert.ok(reports.at(-1)!.loss < reports[0].loss);
});

test('with overlap a synced fragment reaches the parameters τ steps later, as α·local + (1 − α)·global', async () => {
  // Inner lr 0: local steps leave the parameters alone, so the merge is all that moves them.
  const fragments = modelFragments(layout, 2);
  const [w] = workers('none', { fragments, overlapSteps: 2, mixing: 0.25 }, 0);
  await startWorkers([w]);
  const start = await w.engine.readParams();
  const local = start.map((v, i) => v + ((i % 7) - 3) * 1e-3);
  w.engine.writeParams(local);
  await w.strategy.local();
  const payload = await w.strategy.payload();
  assert.equal(payload.kind, 'dense');
  await w.strategy.prepare((payload as { values: Float32Array }).values);
  await w.strategy.commit();
  const global = w.strategy.globalModel!();
  assert.deepEqual(await w.engine.readParams(), local, 'nothing is written at the commit');
  await w.strategy.local();
  const merged = await w.engine.readParams();
  const f = fragments[0];
  const [l, g, m] = [local, global, merged].map((v) => gatherFragment(v, f));
  for (let i = 0; i < m.length; i += 97) assert.ok(Math.abs(m[i] - (0.25 * l[i] + 0.75 * g[i])) < 1e-6, `value ${i}: ${m[i]}`);
  assert.deepEqual(gatherFragment(merged, fragments[1]), gatherFragment(local, fragments[1]), 'the other fragment is untouched');
  // The outer step moved the global fragment toward the member's own: Δ = global − local, mean of one.
  assert.ok(Math.abs(g[5] - l[5]) < Math.abs(gatherFragment(start, f)[5] - l[5]) + 1e-9);

  // Steps trained between the payload and the commit (a runtime overlapping the exchange) count: with
  // τ of them done, the commit merges at once. This sync carries fragment 1.
  const before = await w.engine.readParams();
  const next = await w.strategy.payload();
  await w.strategy.local(2);
  await w.strategy.prepare((next as { values: Float32Array }).values);
  await w.strategy.commit();
  const [b1, g1, m1] = [before, w.strategy.globalModel!(), await w.engine.readParams()].map((v) => gatherFragment(v, fragments[1]));
  for (let i = 0; i < m1.length; i += 97) assert.ok(Math.abs(m1[i] - (0.25 * b1[i] + 0.75 * g1[i])) < 1e-6, `value ${i}: ${m1[i]}`);
});
