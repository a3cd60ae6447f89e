// One end of a WebRTC link for ice-restart.test.ts, run inside a lab host: the Node WebRTC transport
// (@roamhq/wrtc), its signaling as JSON lines on stdout ({ signal }) and stdin ({ signal }), relayed
// by the test. Once open it sends a small frame every 250 ms and reports what it saw ({ event }).
import { createInterface } from 'node:readline';
import { createNodeWebRtcTransport } from '@tabfleet/collective/webrtc-node';
import type { Signaler } from '@tabfleet/collective';

const { self, peer, iceServers, boundMs } = JSON.parse(process.argv[2]) as { self: string; peer: string; iceServers: RTCIceServer[]; boundMs: number };
process.on('unhandledRejection', (e) => process.stderr.write(`unhandled: ${String(e)}\n`));
const out = (m: object) => process.stdout.write(`${JSON.stringify(m)}\n`);
const handlers = new Set<(from: string, data: unknown) => void>();
const signaler: Signaler = {
  send: (_to, data) => out({ signal: data }),
  onSignal: (h) => {
    handlers.add(h);
    return () => handlers.delete(h);
  },
};
createInterface({ input: process.stdin }).on('line', (line) => {
  const m = JSON.parse(line) as { signal?: unknown };
  if (m.signal) for (const h of handlers) h(peer, m.signal);
});
const transport = createNodeWebRtcTransport({
  self, signaler, rtcConfig: { iceServers }, connectTimeoutMs: 60_000, iceRestartBoundMs: boundMs, iceRestartRetryMs: 2_000,
});
let received = 0;
transport.onFrame(() => received++);
transport.onPeerLost((_p, reason) => out({ event: 'lost', reason }));
await transport.connect(peer);
out({ event: 'open' });
setInterval(() => {
  if (transport.isConnected(peer)) transport.send(peer, new Uint8Array([1])).catch(() => {});
  out({ event: 'tick', received, ...transport.iceRestarts(peer) });
}, 250);
