// Real WebRTC in Node (simple-peer over @roamhq/wrtc, loopback): each open link's path read from its
// RTCPeerConnection's getStats(). On one machine with no ICE servers both ends are host candidates
// (the remote one may be learned first as prflx).
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { LocalSignalingHub } from './signaling';
import type { WebRtcTransport } from './webrtc';
import { createNodeWebRtcTransport } from './webrtc-node';

const open: WebRtcTransport[] = [];
after(() => {
  for (const t of open) t.close();
});

test('node WebRTC: every open link reports its selected pair, host to host on loopback', { timeout: 60_000 }, async () => {
  const hub = new LocalSignalingHub();
  const [a, b, c] = ['pa', 'pb', 'pc'].map((self) => createNodeWebRtcTransport({ self, signaler: hub.signaler(self), connectTimeoutMs: 30_000 }));
  open.push(a, b, c);
  assert.deepEqual(await a.linkPaths(), [], 'no link open yet');
  await Promise.all([a.connect('pb'), b.connect('pa'), a.connect('pc'), c.connect('pa')]);
  const paths = await a.linkPaths();
  assert.deepEqual(paths.map((p) => p.peer).sort(), ['pb', 'pc']);
  for (const p of [...paths, ...(await b.linkPaths()), ...(await c.linkPaths())]) {
    assert.equal(p.local, 'host', JSON.stringify(p));
    // A peer's connectivity check can arrive before its candidate is signaled: ICE then knows that
    // same loopback address as peer-reflexive (prflx), still a direct link (one fresh clone in ~10).
    assert.ok(p.remote === 'host' || p.remote === 'prflx', JSON.stringify(p));
    assert.equal(p.relayProtocol, undefined);
    assert.ok(p.rttMs === null || (p.rttMs >= 0 && Number.isFinite(p.rttMs)), JSON.stringify(p));
  }
  assert.deepEqual((await b.linkPaths()).map((p) => p.peer), ['pa']);
  // A closed link is no longer reported.
  a.closeLink('pb');
  assert.deepEqual((await a.linkPaths()).map((p) => p.peer), ['pc']);
});
