// Embedding wrappers: gather rows, and the deterministic scatter-add of its gradient done as a gather.
import type { GpuRuntime, GpuStorage } from '../runtime';
import { grid1d, packUniforms, u } from './common';

/** table [V, D], ids i32 [T] → out [T, D]. */
export function embeddingKernel(rt: GpuRuntime, table: GpuStorage, ids: GpuStorage, out: GpuStorage, T: number, V: number, D: number): void {
  const WG = 256, n = T * D;
  const { workgroups, rowStride } = grid1d(n, WG);
  rt.dispatch({ shader: 'embedding', constants: { WG }, uniforms: packUniforms([u(n), u(rowStride), u(V), u(D)]), buffers: [table, ids, out], workgroups });
}

/** Invocations the embedding gradient aims for: each scans all T ids, so more only adds reads. */
const EMB_TARGET_INVOCATIONS = 512;

/** dy [T, D], ids i32 [T] → dtable [V, D], dtable[v, d] = Σ_{t: ids[t] = v} dy[t, d]. */
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
