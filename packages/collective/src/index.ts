// The collective layer: transports, ring allreduce, allgather, broadcast, sparse allgather, robust group averaging.
// Knows bytes and arrays, not models. WebRTC entry points: '@tabfleet/collective/webrtc-browser'
// (pages) and '@tabfleet/collective/webrtc-node' (Node, @roamhq/wrtc).
export * from './errors';
export * from './transport';
export * from './memory';
export * from './signaling';
export * from './router';
export * from './sparse-codec';
export * from './collective';
export * from './ring';
export * from './group';
export { WebRtcTransport, type WebRtcTransportOptions, type SimplePeerFactory, type SimplePeerLike, type PeerFactoryOptions } from './webrtc';
export * from './home-ring';
export * from './model-share';
