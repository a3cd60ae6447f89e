// Fused causal attention forward (shaders/attention_causal.wgsl): one lane per query row.
import type { GpuRuntime, GpuStorage } from '../runtime';
import { f, grid1d, packUniforms, u } from './common';

const WG = 64;

/** q, k, v [batch, T, D] (D a multiple of 4) → o [batch, T, D], p [batch, T, T]. */
export function causalAttentionKernel(rt: GpuRuntime, q: GpuStorage, k: GpuStorage, v: GpuStorage, o: GpuStorage, p: GpuStorage, batch: number, T: number, D: number, scale: number): void {
  if (D % 4 !== 0) throw new Error(`fused attention needs a head size that is a multiple of 4, got ${D}`);
  const rows = batch * T;
  const { workgroups, rowStride } = grid1d(rows, WG);
  rt.dispatch({ shader: 'attention_causal', constants: { WG }, uniforms: packUniforms([u(rows), u(rowStride), u(T), u(D / 4), f(scale)]), buffers: [q, k, v, o, p], workgroups });
}

/**
 * Models compose attention from matmul and softmax unless told otherwise. Measured on SwiftShader
 * (`npm run bench -- kernels`, bench/results/kernels.json of 2026-11-24): the GPT step with the fused
 * kernel took 1/0.96 of the composed one (quick runs: 1/0.85), since the unrolled matmuls are the
 * fastest kernels there. No GPU adapter has been measured; a lane per query row is not how a GPU
 * kernel should be tiled, so they compose too until a measurement says otherwise.
 */
export const FUSED_ATTENTION_DEFAULT = false;
