// An open link whose ICE state moves while its handler runs is not destroyed. simple-peer's handlers
// read the connection's state again, and wrtc's getter is native (live): a handler that saw
// 'checking' could hand over to simple-peer's, which then read 'failed' and destroyed the link
// without an ICE restart (the lab's ice-restart test failed that way, twice, on a busy machine).
// A fake peer that behaves as simple-peer does there; real links: e2e/lab/ice-restart.test.ts.
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';
import { FakeClock } from '@tabfleet/protocol/testing';
import { LocalSignalingHub } from './signaling';
import { WebRtcTransport, type SimplePeerLike } from './webrtc';

/** The state reads of a connection whose ICE moves on between two reads, and simple-peer's handlers over it. */
class RacyPeer extends EventEmitter {
  destroyed = false;
  /** What the next reads of iceConnectionState give, one each; the last one stays. */
  reads: string[] = [];
  _channel = { bufferedAmount: 0 };
  _pc = (() => {
    const reads = () => this.reads;
    return {
      getStats: async () => new Map(),
      restartIce: () => {},
      get iceConnectionState(): string {
        return reads().length > 1 ? reads().shift()! : reads()[0] ?? 'connected';
      },
      connectionState: 'connected',
    };
  })();
  signal(): void {}
  send(): void {}
  negotiate(): void {}
  destroy(err?: Error): void {
    if (this.destroyed) return;
    this.destroyed = true;
    if (err) this.emit('error', err);
    this.emit('close');
  }
  /** As simple-peer: destroys on 'failed', reading the state itself. */
  _onIceStateChange(): void {
    if (this._pc.iceConnectionState === 'failed') this.destroy(new Error('Ice connection failed.'));
  }
  _onConnectionStateChange(): void {
    if (this._pc.connectionState === 'failed') this.destroy(new Error('Connection failed.'));
  }
}
let racy: RacyPeer; // the peer the transport made last

test('an open link whose ICE goes from checking to failed between two reads is restarted, not lost', () => {
  const clock = new FakeClock();
  const hub = new LocalSignalingHub();
  const t = new WebRtcTransport({
    self: 'a', signaler: hub.signaler('a'), clock, iceRestartBoundMs: 15_000, iceRestartRetryMs: 3_000,
    createPeer: () => (racy = new RacyPeer()) as unknown as SimplePeerLike,
  });
  const lost: string[] = [];
  t.onPeerLost((_p, reason) => lost.push(reason));
  const peer = t.initiates('b') ? 'b' : '0';
  void t.connect(peer).catch(() => {});
  racy.emit('connect');
  assert.equal(t.isConnected(peer), true);
  // The handler's read sees 'checking'; simple-peer's own read a moment later sees 'failed'.
  racy.reads = ['checking', 'failed'];
  racy._onIceStateChange();
  assert.deepEqual(lost, [], 'the link was not destroyed');
  assert.equal(racy.destroyed, false);
  // The state settles at 'failed': the watch restarts ICE, the link still stands until the bound.
  racy.reads = ['failed'];
  racy._onIceStateChange();
  assert.deepEqual(t.iceRestarts(peer), { restarts: 1, recoveries: 0, down: true });
  racy.reads = ['connected'];
  racy._onIceStateChange();
  assert.deepEqual(t.iceRestarts(peer), { restarts: 1, recoveries: 1, down: false });
  assert.deepEqual(lost, []);
  t.close();
});
