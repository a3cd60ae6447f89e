// conv2d wrappers (NCHW, weights [outC, inC, kH, kW]): forward, backward input and backward filter as
// register-tiled implicit GEMMs (4×4 outputs per invocation, no workgroup memory: barriers are what
// SwiftShader is slowest at). The filter gradient splits its long K = B·outH·outW axis across
// invocations and sums the splits with the `reduce` kernel in the same command buffer.
import type { Conv2dParams } from '../../backend';
import type { GpuRuntime, GpuStorage } from '../runtime';
import { grid1d, packUniforms, u } from './common';

const WG = 64;
/** Invocations the split-K filter gradient aims for (enough workgroups for every core to stay busy). */
const FILTER_TARGET_INVOCATIONS = 2048;
/** Shortest K chunk worth a split: below this the partial sums cost more than they parallelize. */
const FILTER_MIN_CHUNK = 64;

const cdiv = (a: number, b: number) => Math.ceil(a / b);

function shapeFields(p: Conv2dParams) {
  return [p.batch, p.inC, p.inH, p.inW, p.outC, p.kH, p.kW, p.stride, p.pad, p.outH, p.outW].map(u);
}

/** Below this many input channels the forward kernel runs one flat K loop (measured on SwiftShader). */
export const CONV_FLAT_MAX_INC = 4;

/**
 * x [B, inC, inH, inW], w [outC, inC, kH, kW], bias [outC] | null → y [B, outC, outH, outW].
 * `flat` picks the loop structure (benchmarks force it); by default flat for inC < CONV_FLAT_MAX_INC.
 */
export function conv2dKernel(
  rt: GpuRuntime, x: GpuStorage, w: GpuStorage, bias: GpuStorage | null, y: GpuStorage, dummy: GpuStorage, p: Conv2dParams,
  flat = p.inC < CONV_FLAT_MAX_INC,
): void {
  const M = p.batch * p.outH * p.outW;
  const chanGroups = cdiv(p.outC, 4);
  const total = cdiv(M, 4) * chanGroups;
  const { workgroups, rowStride } = grid1d(total, WG);
  rt.dispatch({
    shader: 'conv2d', constants: { WG, HAS_BIAS: bias !== null, FLAT: flat },
    uniforms: packUniforms([...shapeFields(p), u(rowStride), u(M), u(chanGroups), u(total), u(0)]),
    buffers: [x, w, bias ?? dummy, y], workgroups,
  });
}

/** dy [B, outC, outH, outW], w [outC, inC, kH, kW] → dx [B, inC, inH, inW]. */
export function conv2dBackwardInputKernel(rt: GpuRuntime, dy: GpuStorage, w: GpuStorage, dx: GpuStorage, p: Conv2dParams): void {
  const M = p.batch * p.inH * p.inW;
  const chanGroups = cdiv(p.inC, 4);
  const total = cdiv(M, 4) * chanGroups;
  const { workgroups, rowStride } = grid1d(total, WG);
  rt.dispatch({
    shader: 'conv2d_backward_input', constants: { WG },
    uniforms: packUniforms([...shapeFields(p), u(rowStride), u(M), u(chanGroups), u(total), u(0)]),
    buffers: [dy, w, dx], workgroups,
  });
}

/** Split count for the filter gradient: enough invocations overall, chunks of at least FILTER_MIN_CHUNK. */
export function filterSplits(p: Conv2dParams): { splits: number; kChunk: number; tiles: number; nGroups: number } {
  const K = p.batch * p.outH * p.outW;
  const nGroups = cdiv(p.inC * p.kH * p.kW, 4);
  const tiles = cdiv(p.outC, 4) * nGroups;
  const wanted = Math.max(1, Math.min(cdiv(FILTER_TARGET_INVOCATIONS, tiles), Math.floor(K / FILTER_MIN_CHUNK)));
  const kChunk = cdiv(K, wanted);
  return { splits: cdiv(K, kChunk), kChunk, tiles, nGroups };
}

/** dy [B, outC, outH, outW], x [B, inC, inH, inW] → dw [outC, inC, kH, kW]. */
export function conv2dBackwardFilterKernel(rt: GpuRuntime, dy: GpuStorage, x: GpuStorage, dw: GpuStorage, p: Conv2dParams): void {
  const { splits, kChunk, tiles, nGroups } = filterSplits(p);
  const MN = p.outC * p.inC * p.kH * p.kW;
  const part = splits > 1 ? rt.alloc(splits * MN, 'conv-dw-splits') : dw;
  const total = tiles * splits;
  const { workgroups, rowStride } = grid1d(total, WG);
  rt.dispatch({
    shader: 'conv2d_backward_filter', constants: { WG },
    uniforms: packUniforms([...shapeFields(p), u(rowStride), u(nGroups), u(tiles), u(total), u(kChunk)]),
    buffers: [dy, x, part], workgroups,
  });
  if (splits === 1) return;
  // part viewed as [1, splits, MN] → dw [MN]: one invocation per weight, summing its splits in order.
  const reduceGrid = grid1d(MN, WG);
  rt.dispatch({
    shader: 'reduce', constants: { OP: 0, WG }, uniforms: packUniforms([u(1), u(splits), u(MN), u(reduceGrid.rowStride)]),
    buffers: [part, dw], workgroups: reduceGrid.workgroups,
  });
  // Released once its consumer is recorded: any later user of the buffer is recorded, so runs, after it.
  rt.release(part);
}
