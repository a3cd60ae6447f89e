// Real WebRTC in Node: simple-peer over @roamhq/wrtc on loopback, signaling through LocalSignalingHub
// (the coordinator's relay in production), four ring members in this process.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { CollectiveError } from './errors';
import { Ring } from './ring';
import { LocalSignalingHub } from './signaling';
import { bitsEqual, intData, plainSum, settleAll } from './testing';
import { createNodeWebRtcTransport } from './webrtc-node';
import type { WebRtcTransport } from './webrtc';

const open: WebRtcTransport[] = [];
after(() => {
  for (const t of open) t.close();
});

function fleet(ids: string[]) {
  // Like the server: signals pass only between ring neighbours.
  const nb = (a: string, b: string) => {
    const i = ids.indexOf(a);
    const j = ids.indexOf(b);
    return (i - j + ids.length) % ids.length === 1 || (j - i + ids.length) % ids.length === 1;
  };
  const hub = new LocalSignalingHub({ allow: nb });
  const transports = ids.map((id) => createNodeWebRtcTransport({ self: id, signaler: hub.signaler(id), connectTimeoutMs: 20_000 }));
  open.push(...transports);
  return { hub, transports };
}

test('4 members over node WebRTC allreduce 16 MB correctly (fp32 and fp16)', { timeout: 120_000 }, async () => {
  const ids = ['w0', 'w1', 'w2', 'w3'];
  const { hub, transports } = fleet(ids);
  const rings = ids.map((id, i) => new Ring({ transport: transports[i], members: ids, self: id, jobId: 'webrtc-node', round: 1, deadlineMs: 60_000 }));
  const tc = performance.now();
  await Promise.all(rings.map((r) => r.connect()));
  const connectMs = performance.now() - tc;
  assert.equal(hub.counters.refused, 0, 'only neighbours signal each other');
  // Round trips are measured on real links too (link-rtt.test checks the values on fake time): each
  // member reports both neighbours', above zero. Waited for by count; no bound on a busy machine's times.
  for (let waited = 0; !rings.every((r) => Object.keys(r.linkRttMs()).length === 2); waited += 10) {
    assert.ok(waited < 20_000, `round trips after 20 s: ${JSON.stringify(rings.map((r) => r.linkRttMs()))}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  for (const r of rings) for (const ms of Object.values(r.linkRttMs())) assert.ok(ms > 0 && Number.isFinite(ms), `${r.self}: ${JSON.stringify(r.linkRttMs())}`);
  const len = (16 * 1024 * 1024) / 4;
  for (const dtype of ['f32', 'f16'] as const) {
    // Integers: exact sums in f32; within f16's range (and its integer precision, 2¹¹) for the f16 wire.
    const inputs = ids.map((_, i) => intData(len, i, dtype === 'f32' ? 1 << 16 : 500));
    const want = Float32Array.from(plainSum(inputs).sum);
    const t0 = performance.now();
    const outs = await Promise.all(rings.map((r, i) => r.allreduce(inputs[i], { dtype, op: 'sum' })));
    const ms = performance.now() - t0;
    if (dtype === 'f32') for (const o of outs) assert.ok(bitsEqual(o, want));
    else {
      for (const o of outs.slice(1)) assert.ok(bitsEqual(o, outs[0]));
      for (let i = 0; i < len; i += 997) assert.ok(Math.abs(outs[0][i] - want[i]) <= 4, `[${i}] ${outs[0][i]} vs ${want[i]}`);
    }
    const busbw = ((16 * 1024 * 1024) / (ms / 1000) / 1e6) * (2 * 3) / 4;
    console.log(`node WebRTC, 4 members, 16 MB ${dtype}: ${ms.toFixed(0)} ms, busbw ${busbw.toFixed(1)} MB/s (connect ${connectMs.toFixed(0)} ms)`);
  }
  for (const t of transports) for (const s of t.stats()) assert.ok(s.maxBufferedAmount <= 1024 * 1024 + 65536, `${t.self}→${s.peer} queued ${s.maxBufferedAmount}`);
  for (const r of rings) r.close();
});

test('node WebRTC: a member that leaves fails the op at every survivor with peer_lost', { timeout: 60_000 }, async () => {
  const ids = ['x0', 'x1', 'x2', 'x3', 'x4'];
  const { transports } = fleet(ids);
  const rings = ids.map((id, i) => new Ring({ transport: transports[i], members: ids, self: id, jobId: 'webrtc-node', round: 2, deadlineMs: 30_000 }));
  await Promise.all(rings.map((r) => r.connect()));
  const len = 2_000_000;
  const inputs = ids.map((_, i) => intData(len, i));
  const t0 = performance.now();
  const ps = rings.map((r, i) => r.allreduce(inputs[i]));
  setTimeout(() => transports[2].close(), 20); // the tab closes mid-op
  const rs = await settleAll(ps);
  const ms = performance.now() - t0;
  for (const i of [0, 1, 3, 4]) assert.ok(rs[i] instanceof CollectiveError && rs[i].code === 'peer_lost', `member ${i}: ${rs[i]}`);
  assert.ok(ms < 10_000, `took ${ms} ms`);
  console.log(`node WebRTC: member left mid-op, survivors rejected after ${ms.toFixed(0)} ms`);
});
