// What ring ops take and count: options, wire dtypes, counters. Shared by the Ring and its op runs
// (the counters by the Group too).
import type { QuantFormat } from '@tabfleet/protocol';
import type { CollectiveOptions } from './collective';
export type ReduceOp = 'sum' | 'mean';
export type WireDType = 'f32' | 'f16';

/** `members` in ring order: self's right neighbour is the next one (wrapping). */
export interface RingOptions extends CollectiveOptions {
  /** Bound on one member's contribution to allgather/broadcast/sparse (default 1 GiB). */
  maxSegmentBytes?: number;
}

export interface OpOptions {
  deadlineMs?: number;
}
export interface AllreduceOptions extends OpOptions {
  op?: ReduceOp;
  /** Wire precision (default f32). f16 halves the bytes; the sum is still accumulated in f32. */
  dtype?: WireDType;
}
export interface AllgatherOptions extends OpOptions {
  dtype?: WireDType;
}
export interface QuantizedAllgatherOptions extends OpOptions {
  /** Values each member's bytes decode to. */
  length: number;
  format: QuantFormat;
  op?: ReduceOp;
}
export interface SparseAllgatherOptions extends OpOptions {
  /** Length of the dense vector the indices point into. */
  length: number;
  op?: ReduceOp;
  /** Wire precision of the values (indices are always u32). */
  dtype?: WireDType;
}

export interface RingCounters {
  opsStarted: number;
  opsCompleted: number;
  opsFailed: number;
  framesIn: number;
  bytesIn: number;
  framesOut: number;
  bytesOut: number;
  /** Frames of an op already finished or failed here. */
  stale: number;
  /** Frames already received (same op, step and chunk): dropped, not added again. */
  duplicate: number;
  /** Frames from a member that is not the expected neighbour. */
  foreign: number;
  /** Frames buffered because they arrived before this member started their op. */
  early: number;
  /** Early frames dropped over the maxEarlyBytes bound. */
  earlyDropped: number;
  /** Malformed or inconsistent frames (each fails the op it belongs to). */
  bad: number;
  abortsSent: number;
  abortsReceived: number;
}
