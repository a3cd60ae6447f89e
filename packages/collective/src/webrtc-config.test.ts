// The transport reads its RTC configuration as each link opens when given a function: links opened
// after the ICE servers changed (TURN credentials renewed) get the new ones, links already open keep
// theirs. The peer factory is a recorder (no connection is made); real links: webrtc-node.test.ts and
// e2e/turn-relay-in-node.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeClock } from '@tabfleet/protocol/testing';
import { LocalSignalingHub } from './signaling';
import { WebRtcTransport, type PeerFactoryOptions, type SimplePeerLike } from './webrtc';

function recordingFactory() {
  const made: PeerFactoryOptions[] = [];
  const createPeer = (o: PeerFactoryOptions): SimplePeerLike => {
    made.push(o);
    return { on: () => undefined, signal: () => {}, send: () => {}, destroy: () => {} };
  };
  return { made, createPeer };
}

test('each new link uses the ICE servers of the moment; without any, host candidates only', () => {
  const clock = new FakeClock();
  const hub = new LocalSignalingHub();
  let iceServers: RTCIceServer[] = [{ urls: ['turn:127.0.0.1:3478'], username: '100:a', credential: 'first' }];
  const { made, createPeer } = recordingFactory();
  const t = new WebRtcTransport({ self: 'a', signaler: hub.signaler('a'), createPeer, clock, rtcConfig: () => ({ iceServers, iceTransportPolicy: 'all' }) });
  void t.connect('b').catch(() => {});
  iceServers = [{ urls: ['turn:127.0.0.1:3478'], username: '200:a', credential: 'renewed' }];
  void t.connect('c').catch(() => {});
  assert.deepEqual(made.map((o) => o.config), [
    { iceServers: [{ urls: ['turn:127.0.0.1:3478'], username: '100:a', credential: 'first' }], iceTransportPolicy: 'all' },
    { iceServers: [{ urls: ['turn:127.0.0.1:3478'], username: '200:a', credential: 'renewed' }], iceTransportPolicy: 'all' },
  ]);
  t.close();

  const plain = recordingFactory();
  const u = new WebRtcTransport({ self: 'a', signaler: hub.signaler('a2'), createPeer: plain.createPeer, clock });
  void u.connect('b').catch(() => {});
  assert.deepEqual(plain.made[0].config, { iceServers: [] });
  u.close();
});
