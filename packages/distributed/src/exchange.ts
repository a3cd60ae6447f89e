// Moves a strategy's payload through a ring: dense vectors by ring allreduce (f32 or f16 on the
// wire), DGC-sparse ones by sparse allgather (gap-coded indices, f16 values); both give every
// member the same mean, byte for byte.
import type { Ring } from '@tabfleet/collective';
import type { Payload } from './strategies';

export function exchange(ring: Ring, p: Payload, deadlineMs?: number): Promise<Float32Array> {
  if (p.kind === 'dense') return ring.allreduce(p.values, { op: 'mean', dtype: p.dtype, deadlineMs });
  return ring.sparseAllgather(p.indices, p.values, { length: p.length, op: 'mean', dtype: p.dtype, deadlineMs });
}
