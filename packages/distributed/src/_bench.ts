import { Rng } from '@tabfleet/tensor';
import { createNodeGpuBackend } from '@tabfleet/tensor/node';
import { DgcCompressor } from './dgc';
const L = 203530;
const gpu = await createNodeGpuBackend();
const rng = new Rng(3);
const g = gpu.upload(Float32Array.from({ length: L }, () => rng.normal()));
for (const [m, clip] of [[0, 0], [0.9, 50]]) {
  const c = new DgcCompressor(gpu, L, { momentum: m, clipNorm: clip, finalSparsity: 0.999, warmupSteps: 0 });
  await c.compress(g, 0);
  const mins: Record<string, number> = {};
  const wall: number[] = [];
  for (let i = 0; i < 25; i++) {
    gpu.rt.startProfile();
    await c.compress(g, 1 + i);
    for (const k of await gpu.rt.stopProfile()) mins[k.kernel] = Math.min(mins[k.kernel] ?? 1e9, k.ms / ((k as any).count ?? 1));
    const t0 = performance.now(); await c.compress(g, 100 + i); wall.push(performance.now() - t0);
  }
  wall.sort((a, b) => a - b);
  console.log(m, clip, JSON.stringify(mins), 'wall min', wall[0].toFixed(2), 'p25', wall[6].toFixed(2), 'median', wall[12].toFixed(2));
}
