// WebRTC transport for pages: simple-peer's browser bundle over the page's RTCPeerConnection.
// (RTCPeerConnection does not exist in workers, so links live on the page.)
import SimplePeer from 'simple-peer/simplepeer.min.js';
import { WebRtcTransport, type SimplePeerLike, type WebRtcTransportOptions } from './webrtc';

export function createBrowserWebRtcTransport(opts: Omit<WebRtcTransportOptions, 'createPeer'>): WebRtcTransport {
  return new WebRtcTransport({ ...opts, createPeer: (o) => new SimplePeer(o) as unknown as SimplePeerLike });
}

export { WebRtcTransport };
