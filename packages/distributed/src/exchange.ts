// Moves a strategy's payload through a ring: dense vectors by ring allreduce (f32 or f16 on the
// wire), DGC-sparse ones by sparse allgather (gap-coded indices, f16 values), block-quantized ones
// by quantized allgather; each gives every member the same mean, byte for byte. Or through a group,
// combined by a robust rule.
import type { Group, GroupAverage, GroupAverageOptions, HomeRing, Ring } from '@tabfleet/collective';
import { QUANT_BLOCK, type Aggregation } from '@tabfleet/protocol';
import { payloadToDense, type Payload } from './strategies';

/**
 * A payload times `factor` (a new one: the strategy keeps its own for re-runs). Paced rounds weight
 * member i by its samples w_i: it sends N·w_i/W times its payload (W = Σ w, known to every member from
 * the round's plan), so the ring's plain mean is the weighted mean Σ w_i·x_i / W.
 */
export function scalePayload(p: Payload, factor: number): Payload {
  if (factor === 1) return p;
  if (p.kind === 'quantized') return { ...p, bytes: scaleQuantized(p.bytes, p.length, factor) };
  const values = p.values.map((v) => v * factor);
  return { ...p, values };
}

/** A quantized vector times a factor ≥ 0: its blocks' scales times the factor, the codes as they were. */
function scaleQuantized(bytes: Uint8Array, length: number, factor: number): Uint8Array {
  if (!(factor >= 0)) throw new Error(`a quantized payload scales by a factor ≥ 0, not ${factor}`);
  const out = bytes.slice();
  const scales = new DataView(out.buffer);
  for (let b = 0; b < Math.ceil(length / QUANT_BLOCK); b++) scales.setFloat32(b * 4, scales.getFloat32(b * 4, true) * factor, true);
  return out;
}

export function exchange(ring: Ring, p: Payload, deadlineMs?: number): Promise<Float32Array> {
  if (p.kind === 'dense') return ring.allreduce(p.values, { op: 'mean', dtype: p.dtype, deadlineMs });
  if (p.kind === 'quantized') return ring.quantizedAllgather(p.bytes, { length: p.length, format: p.format, op: 'mean', deadlineMs });
  return ring.sparseAllgather(p.indices, p.values, { length: p.length, op: 'mean', dtype: p.dtype, deadlineMs });
}

/**
 * Moves a payload through a hierarchical ring (homes sum over their LAN, leaders allreduce): the same
 * mean as `exchange` over a flat ring. The server plans homes for dense payloads only; a sparse one
 * goes dense.
 */
export function homeExchange(ring: HomeRing, p: Payload, deadlineMs?: number): Promise<Float32Array> {
  const values = p.kind === 'dense' ? p.values : payloadToDense(p, p.length);
  return ring.allreduce(values, { op: 'mean', dtype: p.dtype, deadlineMs });
}

/**
 * Moves a payload through a group (untrusted jobs): each part's owner combines the members'
 * contributions with the job's robust rule. A DGC-sparse payload goes as each part's nonzero pairs
 * (an index a member did not send counts as its zero); a quantized one as each part's blocks, exactly
 * the bytes its error feedback assumed, the aggregates coming back as f16.
 */
export function groupExchange(group: Group, p: Payload, combine: GroupCombine, deadlineMs?: number): Promise<GroupAverage> {
  const values = p.kind === 'dense' ? p.values : payloadToDense(p, p.length);
  return group.average(values, { ...groupWire(p, combine), deadlineMs });
}

/** How a group's owners combine parts: the job's rule, and in paced rounds each member's weight (member order). */
export interface GroupCombine {
  rule: Aggregation;
  trimFraction?: number;
  weights?: readonly number[];
}

/** How a payload goes through a group: the rule, and the wire (f32/f16, dense, its nonzero pairs or its quantized blocks). `Group.validate` takes the same. */
export function groupWire(p: Payload, combine: GroupCombine): GroupAverageOptions {
  if (p.kind === 'quantized') return { ...combine, dtype: 'f16', quantized: p.format };
  return { ...combine, dtype: p.dtype, sparse: p.kind === 'sparse' };
}
