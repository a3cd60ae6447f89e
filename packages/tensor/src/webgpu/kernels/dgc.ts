// DGC wrappers (packages/distributed's DgcCompressor): ‖g‖², momentum correction + accumulation with
// masking and clipping fused, threshold sample, radix-select threshold, selection + compaction.
// All of them record into the runtime's open pass; nothing here reads back.
import type { DgcAccumulateParams, DgcSampleParams, DgcSelectParams } from '../../backend';
import type { GpuRuntime, GpuStorage } from '../runtime';
import { f, grid1d, packUniforms, u } from './common';

/**
 * Tuning, mutable for benchmarks. vec4s per dgc_select invocation: on CPU adapters (SwiftShader) 64
 * amortizes the threshold load and loop setup (L = 203,530: 1.05 ms vs 1.44 ms at 16, 2.95 ms at 1; a
 * plain copy of the same vector takes 1.31 ms); real GPUs want many invocations. dgc_threshold's
 * workgroup size: 64 beat 256 on SwiftShader (0.26 vs 0.59 ms; fewer coroutines per barrier).
 */
export const DGC_TUNING = { selectPerInvocationCpu: 64, selectPerInvocationGpu: 2, thresholdWg: 64 };

/** Invocations of the first ‖g‖² stage (each sums ~n/(4·T) vec4s); the second stage is one invocation. */
const SUMSQ_PARTIALS = 512;

/** x: [n] → dst: [1] = Σ x², via T partials in a pooled scratch buffer (2 dispatches). */
export function dgcSumSquaresKernel(rt: GpuRuntime, x: GpuStorage, n: number, dst: GpuStorage): void {
  const WG = 64;
  const T = Math.max(1, Math.min(SUMSQ_PARTIALS, Math.ceil(n / 4)));
  const partials = rt.alloc(T, 'dgc-sumsq-partials');
  rt.dispatch({ shader: 'dgc_sumsq', constants: { SQUARE: true, WG }, uniforms: packUniforms([u(n), u(T)]), buffers: [x, partials], workgroups: [Math.ceil(T / WG)] });
  rt.dispatch({ shader: 'dgc_sumsq', constants: { SQUARE: false, WG }, uniforms: packUniforms([u(T), u(1)]), buffers: [partials, dst], workgroups: [1] });
  rt.release(partials); // later work in this submission may reuse it; the queue keeps the order
}

/** g, u, v: [n], in place (u unused when momentum is 0, sumSq: [1] unused unless clipping). */
export function dgcAccumulateKernel(rt: GpuRuntime, g: GpuStorage, uu: GpuStorage, v: GpuStorage, sumSq: GpuStorage, p: DgcAccumulateParams): void {
  const WG = 64;
  const { workgroups, rowStride } = grid1d(Math.ceil(p.n / 4), WG);
  const mask = p.maskThreshold > 0;
  rt.dispatch({
    shader: 'dgc_accumulate',
    constants: { MOMENTUM: p.momentum !== 0, CLIP: p.clipNorm > 0, MASK: mask, WG },
    uniforms: packUniforms([u(p.n), u(rowStride), f(p.momentum), f(p.clipNorm), f(mask ? p.maskThreshold : 0), u(mask ? p.maskTieIndex >>> 0 : 0)]),
    buffers: [g, uu, v, sumSq], workgroups,
  });
}

/** v: [n] → out[offset, offset + count) (sample magnitudes as f32 bits). */
export function dgcSampleKernel(rt: GpuRuntime, v: GpuStorage, out: GpuStorage, p: DgcSampleParams): void {
  const WG = 64;
  rt.dispatch({
    shader: 'dgc_sample', constants: { WG },
    uniforms: packUniforms([u(p.n), u(p.count), u(p.stride), u(p.seed >>> 0), u(p.offset)]),
    buffers: [v, out], workgroups: [Math.ceil(p.count / WG)],
  });
}

/** out[offset, offset + count) → out[0..3) (count reset, threshold, rank-th largest). One workgroup. */
export function dgcThresholdKernel(rt: GpuRuntime, out: GpuStorage, count: number, rank: number, offset: number): void {
  rt.dispatch({ shader: 'dgc_threshold', constants: { WG: DGC_TUNING.thresholdWg }, uniforms: packUniforms([u(count), u(rank), u(offset)]), buffers: [out], workgroups: [1] });
}

/** v: [n], threshold out[1] → count out[0], pairs out[pairsOffset, pairsOffset + 2·capacity). */
export function dgcSelectKernel(rt: GpuRuntime, v: GpuStorage, out: GpuStorage, p: DgcSelectParams): void {
  const WG = 64, PER_INVOCATION = rt.adapter.isCpu ? DGC_TUNING.selectPerInvocationCpu : DGC_TUNING.selectPerInvocationGpu;
  const T = Math.max(1, Math.ceil(Math.ceil(p.n / 4) / PER_INVOCATION));
  const { workgroups, rowStride } = grid1d(T, WG);
  rt.dispatch({
    shader: 'dgc_select', constants: { WG, PER_INVOCATION },
    uniforms: packUniforms([u(p.n), u(rowStride), u(p.capacity), u(p.pairsOffset), u(T)]),
    buffers: [v, out], workgroups,
  });
}
