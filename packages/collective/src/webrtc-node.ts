// WebRTC transport for Node: simple-peer over @roamhq/wrtc (native libwebrtc). Node only.
import wrtc from '@roamhq/wrtc';
import SimplePeer from 'simple-peer';
import { WebRtcTransport, type SimplePeerLike, type WebRtcTransportOptions } from './webrtc';

export function createNodeWebRtcTransport(opts: Omit<WebRtcTransportOptions, 'createPeer'>): WebRtcTransport {
  return new WebRtcTransport({
    ...opts,
    createPeer: (o) => new SimplePeer({ ...o, wrtc: wrtc as unknown as SimplePeer.Options['wrtc'] }) as unknown as SimplePeerLike,
  });
}

export { WebRtcTransport };
