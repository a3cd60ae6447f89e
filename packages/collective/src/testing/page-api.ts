// What the collective test page (e2e/pages/collective.ts) takes and returns; shared with the Node side
// (headless's collective-tabs.ts, the in-browser test, bench/allreduce.ts), so types only: no DOM, no Node globals.
import type { IceServer, LinkPath } from '@tabfleet/protocol';
import type { LinkStats, ReduceOp, RingCounters, WireDType } from '../index';

export interface InitOptions {
  self: string;
  members: string[];
  jobId: string;
  round: number;
  deadlineMs?: number;
  highWaterMark?: number;
  /** ICE servers for the links (default none: host candidates). */
  iceServers?: IceServer[];
  /** The transport's iceRestartBoundMs. */
  iceRestartBoundMs?: number;
}

export interface CheckResult {
  ms: number;
  /** Elements that differ from the plain sum (f32: exactly; f16: beyond its rounding). */
  mismatches: number;
  maxErr: number;
  /** FNV-1a of the result's bytes, compared across tabs. */
  checksum: string;
  inputUntouched: boolean;
}

/** Wall-clock (performance.timeOrigin + now) start and end of one run at one tab, ms. */
export interface TimedRun {
  start: number;
  end: number;
}

export interface RawResult {
  bytes: number;
  frames: number;
  /** Wall-clock ms: this tab started sending, handed over its last frame, got the right neighbour's ack. */
  sendStart: number;
  sendEnd: number;
  ackAt: number;
  /** Wall-clock ms of the first and last frame from the left neighbour. */
  recvFirst: number;
  recvLast: number;
}

export interface CollectivePageApi {
  init(o: InitOptions): void;
  /** Opens the links to both neighbours; resolves with the time it took, ms. */
  connect(): Promise<number>;
  allreduceCheck(o: { len: number; seed: number; dtype: WireDType; op: ReduceOp; range: number }): Promise<CheckResult>;
  allreduceTimed(o: { bytes: number; dtype: WireDType; runs: number; seed: number }): Promise<{ runs: TimedRun[]; checksum: string }>;
  /** Streams `bytes` of raw frames to the right neighbour while receiving the left one's (all links at once). */
  raw(o: { bytes: number; tag: number }): Promise<RawResult>;
  stats(): { links: LinkStats[]; ring: RingCounters };
  /** Each neighbour's link: ICE restarts tried, times it came back, whether it is down now. */
  iceRestarts(): Record<string, { restarts: number; recoveries: number; down: boolean }>;
  /** The selected ICE candidate pair of each open link (the transport's linkPaths). */
  linkPaths(): Promise<LinkPath[]>;
  close(): void;
}
