// Helpers shared by this package's tests: a ring or group of MemoryTransports, test data, reference sums.
import { mulberry32 } from '@tabfleet/protocol';
import { Group, type GroupOptions } from './group';
import { MemoryNetwork, type MemoryNetworkOptions, type MemoryTransport } from './memory';
import { Ring, type RingOptions } from './ring';

export interface TestRing {
  net: MemoryNetwork;
  ids: string[];
  transports: MemoryTransport[];
  rings: Ring[];
}

export async function memoryRing(n: number, opts: { net?: MemoryNetworkOptions; ring?: Partial<RingOptions>; connect?: boolean } = {}): Promise<TestRing> {
  const net = new MemoryNetwork(opts.net);
  const ids = Array.from({ length: n }, (_, i) => `m${i}`);
  const transports = ids.map((id) => net.endpoint(id));
  const rings = ids.map((id, i) => new Ring({ transport: transports[i], members: ids, self: id, jobId: 'job-test', round: 1, deadlineMs: 20_000, ...opts.ring }));
  if (opts.connect !== false) await Promise.all(rings.map((r) => r.connect()));
  return { net, ids, transports, rings };
}

export interface TestGroup {
  net: MemoryNetwork;
  ids: string[];
  transports: MemoryTransport[];
  groups: Group[];
}

export function memoryGroup(n: number, opts: Partial<GroupOptions> = {}, net = new MemoryNetwork({ seed: 5 })): TestGroup {
  const ids = Array.from({ length: n }, (_, i) => `m${i}`);
  const transports = ids.map((id) => net.endpoint(id));
  const groups = ids.map((id, i) => new Group({ transport: transports[i], members: ids, self: id, jobId: 'job-test', round: 1, deadlineMs: 10_000, ...opts }));
  return { net, ids, transports, groups };
}

/** Integers in [-range, range]: every fp32 (and small fp16) sum of a few of them is exact. */
export function intData(len: number, seed: number, range = 1000): Float32Array {
  const rand = mulberry32(seed);
  const a = new Float32Array(len);
  for (let i = 0; i < len; i++) a[i] = Math.round((rand() * 2 - 1) * range);
  return a;
}

export function floatData(len: number, seed: number): Float32Array {
  const rand = mulberry32(seed);
  const a = new Float32Array(len);
  for (let i = 0; i < len; i++) a[i] = (rand() * 2 - 1) * 10 ** (rand() * 4 - 2);
  return a;
}

/** Plain sum in f64, and Σ|x| per element (for error bounds). */
export function plainSum(inputs: Float32Array[]): { sum: Float64Array; abs: Float64Array } {
  const len = inputs[0].length;
  const sum = new Float64Array(len);
  const abs = new Float64Array(len);
  for (const x of inputs) {
    for (let i = 0; i < len; i++) {
      sum[i] += x[i];
      abs[i] += Math.abs(x[i]);
    }
  }
  return { sum, abs };
}

export function bitsEqual(a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false;
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

/** Settles every promise; rejections become their error. */
export function settleAll<T>(ps: Promise<T>[]): Promise<(T | Error)[]> {
  return Promise.all(ps.map((p) => p.then((v) => v, (e: Error) => e)));
}

/** A vector of `len` with `count` nonzero entries at random places. */
export function sparseData(len: number, count: number, seed: number): Float32Array {
  const out = new Float32Array(len);
  const values = floatData(count, seed);
  const place = intData(count, seed + 1000, len);
  for (let i = 0; i < count; i++) out[Math.abs(place[i]) % len] = values[i];
  return out;
}
