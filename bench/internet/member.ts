// One member of the internet benchmark, run inside a lab host (a home behind a NAT router): the real
// collective over real WebRTC (`createNodeWebRtcTransport`, @roamhq/wrtc), signaling through the relay
// on a public host (relay.ts). The benchmark drives it over stdin (one JSON command a line)
// and reads its answers from stdout (lines starting with ANSWER_MARK, one JSON object each).
// `node --import tsx bench/internet/member.ts NAME RELAY_HOST RELAY_PORT`.
import { connect as tcpConnect } from 'node:net';
import { createInterface } from 'node:readline';
import { Group, Ring, type Signaler } from '@tabfleet/collective';
import { createNodeWebRtcTransport, type WebRtcTransport } from '@tabfleet/collective/webrtc-node';
import { checksFor, mulberry32, type IceServer } from '@tabfleet/protocol';
import { ANSWER_MARK, ROBUST_RULE, type MemberCommand, type SelectedPair } from './config';

const [self, relayHost, relayPort] = process.argv.slice(2);
if (!self || !relayHost || !relayPort) {
  console.error('usage: member.ts NAME RELAY_HOST RELAY_PORT');
  process.exit(2);
}

/** The one relay connection, shared by every transport: messages carry the channel they belong to. */
const relay = tcpConnect({ host: relayHost, port: Number(relayPort) });
relay.setNoDelay(true);
relay.write(`${JSON.stringify({ hello: self })}\n`);
relay.on('error', (e) => {
  console.error(`${self}: relay connection failed: ${e.message}`);
  process.exit(1);
});
const channels = new Map<string, (from: string, data: unknown) => void>();
// A peer's offer can come in before this member has read the command that opens its side: kept until then.
const early = new Map<string, { from: string; sig: unknown }[]>();
createInterface({ input: relay }).on('line', (line) => {
  const msg = JSON.parse(line) as { from: string; data: { ch: string; sig: unknown }; welcome?: string };
  // Registered with the relay: signals to this member reach it from now on (answer 0 says so).
  if (msg.welcome !== undefined) return void process.stdout.write(`${ANSWER_MARK}${JSON.stringify({ id: 0, ok: true })}\n`);
  const handler = channels.get(msg.data.ch);
  if (handler) handler(msg.from, msg.data.sig);
  else if (!released.has(msg.data.ch)) early.set(msg.data.ch, [...(early.get(msg.data.ch) ?? []), { from: msg.from, sig: msg.data.sig }]);
});
const released = new Set<string>();

function signaler(ch: string): Signaler {
  return {
    send: (to, sig) => relay.write(`${JSON.stringify({ to, data: { ch, sig } })}\n`),
    onSignal: (handler) => {
      channels.set(ch, handler);
      const waiting = early.get(ch) ?? [];
      early.delete(ch);
      for (const m of waiting) queueMicrotask(() => handler(m.from, m.sig));
      return () => channels.delete(ch);
    },
  };
}

const transports = new Map<string, WebRtcTransport>();

function newTransport(ch: string, iceServers: IceServer[], connectTimeoutMs: number): WebRtcTransport {
  const t = createNodeWebRtcTransport({ self, signaler: signaler(ch), rtcConfig: { iceServers: iceServers as RTCIceServer[] }, connectTimeoutMs });
  transports.set(ch, t);
  return t;
}

/** Epoch ms with sub-ms precision: every member process on this machine reads the same clock. */
const now = () => performance.timeOrigin + performance.now();

/** The candidate pair ICE selected for the link to `peer`: the transport's own reading of getStats() (ice-path.ts). */
async function selectedPair(t: WebRtcTransport, peer: string): Promise<SelectedPair> {
  const path = (await t.linkPaths()).find((p) => p.peer === peer);
  if (!path) throw new Error(`no selected candidate pair to ${peer}`);
  return { local: path.local, remote: path.remote, relayProtocol: path.relayProtocol ?? null, rttMs: path.rttMs };
}

/** The benchmark's vector for (seed, this member): uniform in [−1, 1), the same at every run. */
function vector(values: number, seed: number, rank: number): Float32Array {
  const rand = mulberry32(seed * 1009 + rank + 1);
  const v = new Float32Array(values);
  for (let i = 0; i < values; i++) v[i] = rand() * 2 - 1;
  return v;
}

/** FNV-1a of the result's bytes, so the benchmark can check that every member ended with the same ones. */
function checksum(v: Float32Array): string {
  const b = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  let h = 0x811c9dc5;
  for (let i = 0; i < b.length; i++) h = Math.imul(h ^ b[i], 0x01000193);
  return (h >>> 0).toString(16);
}

function netTransport(net: string): WebRtcTransport {
  const t = transports.get(net);
  if (!t) throw new Error(`no network ${net}`);
  return t;
}

async function handle(c: MemberCommand): Promise<Record<string, unknown>> {
  switch (c.cmd) {
    case 'setup': {
      // One link setup: a fresh transport, connect() until the data channel is open.
      const t = newTransport(c.ch, c.iceServers, c.timeoutMs);
      const t0 = performance.now();
      await t.connect(c.peer);
      const ms = performance.now() - t0;
      return { ms, pair: await selectedPair(t, c.peer) };
    }
    case 'open': {
      // A network for the collectives: links to every other member, opened at once.
      const t = newTransport(c.ch, c.iceServers, c.timeoutMs);
      const peers = c.members.filter((m) => m !== self);
      const t0 = performance.now();
      await Promise.all(peers.map((p) => t.connect(p)));
      const ms = performance.now() - t0;
      const pairs: Record<string, SelectedPair> = {};
      for (const p of peers) pairs[p] = await selectedPair(t, p);
      return { ms, pairs };
    }
    case 'pairs': {
      // The pairs that carry the network's links now (ICE may have moved since they opened).
      const t = netTransport(c.ch);
      const pairs: Record<string, SelectedPair> = {};
      for (const p of c.members.filter((m) => m !== self)) pairs[p] = await selectedPair(t, p);
      return { pairs };
    }
    case 'release': {
      transports.get(c.ch)?.close();
      transports.delete(c.ch);
      channels.delete(c.ch);
      early.delete(c.ch);
      released.add(c.ch);
      return {};
    }
    case 'ring':
    case 'group': {
      const transport = netTransport(c.ch);
      const opts = { transport, members: c.members, self, jobId: 'bench-internet', round: c.round, deadlineMs: c.deadlineMs };
      const data = vector(c.values, c.seed, c.members.indexOf(self));
      const start = now();
      let result: Float32Array;
      let bytesOut: number;
      let checks = 0;
      if (c.cmd === 'ring') {
        const ring = new Ring(opts);
        try {
          result = await ring.allreduce(data, { op: 'mean' });
          bytesOut = ring.counters.bytesOut;
        } finally {
          ring.close();
        }
      } else {
        const group = new Group(opts);
        try {
          const avg = await group.average(data, { rule: ROBUST_RULE });
          if (avg.refused.length) throw new Error(`honest contributions refused: ${JSON.stringify(avg.refused)}`);
          result = avg.mean;
          if (c.validate) {
            // The parts the server would draw for this round (protocol's checksFor), drawn here from the round.
            const drawn = checksFor(c.members, mulberry32(c.round));
            checks = drawn.length;
            await group.validate(avg.contribution, drawn, { rule: ROBUST_RULE });
          }
          bytesOut = group.counters.bytesOut;
        } finally {
          group.close();
        }
      }
      return { start, end: now(), bytesOut, checksum: checksum(result), checks };
    }
    case 'exit':
      setTimeout(() => process.exit(0), 10);
      return {};
  }
}

createInterface({ input: process.stdin }).on('line', (line) => {
  const c = JSON.parse(line) as MemberCommand;
  handle(c).then(
    (r) => process.stdout.write(`${ANSWER_MARK}${JSON.stringify({ id: c.id, ok: true, ...r })}\n`),
    (e: Error) => process.stdout.write(`${ANSWER_MARK}${JSON.stringify({ id: c.id, ok: false, error: e.message })}\n`),
  );
});
process.stdin.on('end', () => process.exit(0));
