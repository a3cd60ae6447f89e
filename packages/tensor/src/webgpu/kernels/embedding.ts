// Embedding wrappers: gather rows, and the deterministic scatter-add of its gradient done as a gather.
import type { GpuRuntime, GpuStorage } from '../runtime';
import { grid1d, packUniforms, u } from './common';

/** table [V, D], ids i32 [T] → out [T, D]. */
export function embeddingKernel(rt: GpuRuntime, table: GpuStorage, ids: GpuStorage, out: GpuStorage, T: number, V: number, D: number): void {
  const WG = 256, n = T * D;
  const { workgroups, rowStride } = grid1d(n, WG);
  rt.dispatch({ shader: 'embedding', constants: { WG }, uniforms: packUniforms([u(n), u(rowStride), u(V), u(D)]), buffers: [table, ids, out], workgroups });
}

/**
 * dy [T, D] and the ids' positions grouped by id (index i32 [rows, starts, positions]) → dtable [V, D]:
 * a fill, then one invocation per (present row, column) summing that row's positions. Measured on
 * SwiftShader (Dawn, 2 cores; each figure one dispatch plus reading dtable back, median of 4): V = 256,
 * D = 128, T = 1,024: 26.3 ms scanning every id, 6.7 ms grouped; V = 50,257 (GPT-2), D = 128,
 * T = 1,024: 1,550 ms against 61 ms; D = 64, T = 4,096: 6,137 ms against 49 ms.
 */
export function embeddingBackwardRowsKernel(rt: GpuRuntime, dy: GpuStorage, index: GpuStorage, rows: number, dtable: GpuStorage, V: number, D: number): void {
  const WG = 64, n = rows * D;
  const { workgroups, rowStride } = grid1d(n, WG);
  rt.dispatch({
    shader: 'embedding_backward_rows', constants: { WG },
    uniforms: packUniforms([u(n), u(rowStride), u(rows), u(D), u(V), u(0), u(0), u(0)]),
    buffers: [dy, index, dtable], workgroups,
  });
}

/** Invocations the embedding gradient aims for: each scans all T ids, so more only adds reads. */
const EMB_TARGET_INVOCATIONS = 512;

/** Without grouped positions (ids not made by tensor(…, { groupIds })): dy [T, D], ids i32 [T] → dtable [V, D], O(V·T) id reads. */
export function embeddingBackwardKernel(rt: GpuRuntime, dy: GpuStorage, ids: GpuStorage, dtable: GpuStorage, T: number, V: number, D: number): void {
  // Column chunks per row: only as many as it takes to reach the target invocation count.
  const chunks = Math.max(1, Math.min(D, Math.ceil(EMB_TARGET_INVOCATIONS / V)));
  const CW = Math.ceil(D / chunks);
  const WG = 64, n = V * chunks;
  const { workgroups, rowStride } = grid1d(n, WG);
  rt.dispatch({
    shader: 'embedding_backward', constants: { WG },
    uniforms: packUniforms([u(n), u(rowStride), u(T), u(D), u(chunks), u(CW), u(0), u(0)]),
    buffers: [dy, ids, dtable], workgroups,
  });
}
