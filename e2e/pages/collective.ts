// One ring member in a tab: a WebRTC transport (simple-peer's browser bundle) whose signaling is
// bridged to the Node test through Playwright (window.tabfleetSignalOut out, tabfleetSignalIn in),
// a Ring, and the calls e2e/collective-in-browser.test.ts and bench/allreduce.ts drive:
// allreduce with a check against the plain sum, timed allreduce runs, and raw streaming of the same
// frames over the same data channels.
import { allocFrame, checksumOf, decodeFrame, FRAME_HEADER_BYTES, MAX_FRAME_PAYLOAD, mulberry32 } from '@tabfleet/protocol';
import { Ring, type Signaler } from '@tabfleet/collective';
import { createBrowserWebRtcTransport, type WebRtcTransport } from '@tabfleet/collective/webrtc-browser';
import type { CollectivePageApi, InitOptions, RawResult, TimedRun } from '@tabfleet/collective/testing';

declare global {
  interface Window {
    /** Exposed by the Node side (page.exposeFunction): relays a signal to member `to`. */
    tabfleetSignalOut?: (to: string, data: unknown) => Promise<void>;
    /** Exposed by the Node side: resolves once every tab of the fleet has called it (synchronized starts). */
    tabfleetBarrier?: () => Promise<void>;
    /** Called by the Node side with a signal for this member. */
    tabfleetSignalIn: (from: string, data: unknown) => void;
    tabfleetCollective: CollectivePageApi;
  }
}

const out = document.getElementById('out');
function log(line: string): void {
  console.log(`[collective] ${line}`);
  if (out) out.textContent += `${line}\n`;
}

const signalHandlers = new Set<(from: string, data: unknown) => void>();
window.tabfleetSignalIn = (from, data) => {
  for (const h of signalHandlers) h(from, data);
};
const signaler: Signaler = {
  send(to, data) {
    if (!window.tabfleetSignalOut) throw new Error('no signaling bridge: the test must expose tabfleetSignalOut');
    void window.tabfleetSignalOut(to, data);
  },
  onSignal(h) {
    signalHandlers.add(h);
    return () => signalHandlers.delete(h);
  },
};

let transport: WebRtcTransport | null = null;
let ring: Ring | null = null;
let opts: InitOptions | null = null;

function need<T>(x: T | null, what: string): T {
  if (!x) throw new Error(`${what} is not set up: call init() first`);
  return x;
}

/** Member m's test vector: integers in [−range, range] from seed (seed, m), so any tab can compute every member's data. */
function memberData(len: number, seed: number, m: number, range: number): Float32Array {
  const rand = mulberry32(seed * 1000 + m + 1);
  const a = new Float32Array(len);
  for (let i = 0; i < len; i++) a[i] = Math.round((rand() * 2 - 1) * range);
  return a;
}

async function barrier(): Promise<void> {
  await window.tabfleetBarrier?.();
}

const wallNow = () => performance.timeOrigin + performance.now();

const api: CollectivePageApi = {
  init(o) {
    ring?.close();
    transport?.close();
    opts = o;
    transport = createBrowserWebRtcTransport({
      self: o.self, signaler, highWaterMark: o.highWaterMark, connectTimeoutMs: 30_000, rtcConfig: { iceServers: o.iceServers ?? [] }, iceRestartBoundMs: o.iceRestartBoundMs,
    });
    ring = new Ring({ transport, members: o.members, self: o.self, jobId: o.jobId, round: o.round, deadlineMs: o.deadlineMs });
    log(`${o.self}: ring [${o.members.join(' → ')}], left ${ring.left}, right ${ring.right}`);
  },

  async connect() {
    const t0 = performance.now();
    await need(ring, 'ring').connect();
    return performance.now() - t0;
  },

  async allreduceCheck({ len, seed, dtype, op, range }) {
    const r = need(ring, 'ring');
    const mine = memberData(len, seed, r.rank, range);
    const t0 = performance.now();
    const res = await r.allreduce(mine, { dtype, op });
    const ms = performance.now() - t0;
    // The plain sum, member by member.
    const want = new Float64Array(len);
    for (let m = 0; m < r.size; m++) {
      const x = m === r.rank ? mine : memberData(len, seed, m, range);
      for (let i = 0; i < len; i++) want[i] += x[i];
    }
    let mismatches = 0;
    let maxErr = 0;
    for (let i = 0; i < len; i++) {
      const w = op === 'mean' ? want[i] / r.size : want[i];
      const err = Math.abs(res[i] - w);
      if (err > maxErr) maxErr = err;
      if (dtype === 'f32' ? res[i] !== Math.fround(w) : err > Math.abs(w) * 2 ** -10 * r.size) mismatches++;
    }
    log(`${r.self}: allreduce ${len} floats ${dtype} ${op} in ${ms.toFixed(0)} ms, ${mismatches} mismatches, max error ${maxErr}`);
    return { ms, mismatches, maxErr, checksum: checksumOf(res), inputUntouched: checksumOf(mine) === checksumOf(memberData(len, seed, r.rank, range)) };
  },

  async allreduceTimed({ bytes, dtype, runs, seed }) {
    const r = need(ring, 'ring');
    const data = memberData(bytes / 4, seed, r.rank, 1000);
    const results: TimedRun[] = [];
    let sum = '';
    for (let i = 0; i < runs; i++) {
      // The Node side starts every tab's run together; each run is timed in wall-clock time so the
      // slowest member's end against the earliest start can be taken.
      await barrier();
      const start = wallNow();
      const res = await r.allreduce(data, { dtype, op: 'sum' });
      const end = wallNow();
      sum = checksumOf(res);
      results.push({ start, end });
    }
    return { runs: results, checksum: sum };
  },

  async raw({ bytes, tag }) {
    const t = need(transport, 'transport');
    const r = need(ring, 'ring');
    const o = need(opts, 'options');
    const frames = Math.ceil(bytes / MAX_FRAME_PAYLOAD);
    const hdr = { job: 0, round: o.round, op: tag, step: 0, segment: 0 };
    let recvFirst = 0;
    let recvLast = 0;
    let got = 0;
    let ackAt = 0;
    let resolveRecv!: () => void;
    let resolveAck!: () => void;
    const recvDone = new Promise<void>((res) => (resolveRecv = res));
    const ackDone = new Promise<void>((res) => (resolveAck = res));
    const off = t.onFrame((from, b) => {
      const f = decodeFrame(b);
      if (f.op !== tag) return;
      if (f.kind === 'raw' && from === r.left) {
        const now = wallNow();
        if (got === 0) recvFirst = now;
        recvLast = now;
        got++;
        if (got === frames) {
          void t.send(r.left, allocFrame({ ...hdr, kind: 'ack', dtype: 'u8', flags: 0, chunk: 0 }, 0));
          resolveRecv();
        }
      } else if (f.kind === 'ack' && from === r.right) {
        ackAt = wallNow();
        resolveAck();
      }
    });
    await barrier();
    const sendStart = wallNow();
    let left = bytes;
    for (let c = 0; c < frames; c++) {
      const n = Math.min(MAX_FRAME_PAYLOAD, left);
      left -= n;
      const frame = allocFrame({ ...hdr, kind: 'raw', dtype: 'u8', flags: 0, chunk: c }, n);
      frame[FRAME_HEADER_BYTES] = c & 0xff;
      await t.send(r.right, frame);
    }
    const sendEnd = wallNow();
    await Promise.all([recvDone, ackDone]);
    off();
    const res: RawResult = { bytes, frames, sendStart, sendEnd, ackAt, recvFirst, recvLast };
    return res;
  },

  stats() {
    return { links: need(transport, 'transport').stats(), ring: { ...need(ring, 'ring').counters } };
  },

  iceRestarts() {
    const r = need(ring, 'ring');
    const t = need(transport, 'transport');
    return Object.fromEntries([...new Set([r.left, r.right])].map((peer) => [peer, t.iceRestarts(peer)]));
  },

  linkPaths() {
    return need(transport, 'transport').linkPaths();
  },

  close() {
    ring?.close();
    transport?.close();
    ring = null;
    transport = null;
  },
};

window.tabfleetCollective = api;
log('ready');

