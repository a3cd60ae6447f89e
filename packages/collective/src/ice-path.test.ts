// linkPathOf on recorded getStats() reports: @roamhq/wrtc on loopback (host) and through coturn
// (relay), trimmed to the entries that matter, as wrtc printed them; a pair Firefox marks `selected`;
// a report with no pair chosen yet.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { linkPathOf, type StatsEntry } from './ice-path';

const report = (entries: StatsEntry[]) => new Map(entries.map((e) => [e.id, e]));

/** wrtc, two connections on one machine: several pairs succeeded, the transport names the selected one. */
const wrtcHost: StatsEntry[] = [
  { id: 'RTCTransport_0_1', type: 'transport', selectedCandidatePairId: 'RTCIceCandidatePair_VlWSUiMG_SHCa5qnB' },
  { id: 'RTCIceCandidatePair_bMUJg64Y_QxEpjm7d', type: 'candidate-pair', localCandidateId: 'RTCIceCandidate_bMUJg64Y', remoteCandidateId: 'RTCIceCandidate_QxEpjm7d',
    state: 'succeeded', nominated: false, totalRoundTripTime: 0.001, currentRoundTripTime: 0.001 },
  { id: 'RTCIceCandidatePair_VlWSUiMG_SHCa5qnB', type: 'candidate-pair', localCandidateId: 'RTCIceCandidate_VlWSUiMG', remoteCandidateId: 'RTCIceCandidate_SHCa5qnB',
    state: 'succeeded', nominated: true, totalRoundTripTime: 0.001, currentRoundTripTime: 0.0042, responsesReceived: 4 },
  { id: 'RTCIceCandidate_VlWSUiMG', type: 'local-candidate', candidateType: 'host' },
  { id: 'RTCIceCandidate_SHCa5qnB', type: 'remote-candidate', candidateType: 'host' },
  { id: 'RTCIceCandidate_bMUJg64Y', type: 'local-candidate', candidateType: 'host' },
  { id: 'RTCIceCandidate_QxEpjm7d', type: 'remote-candidate', candidateType: 'host' },
];

/** wrtc with `iceTransportPolicy: 'relay'` through coturn on 127.0.0.1: it fills relayProtocol and url. */
const wrtcRelay: StatsEntry[] = [
  { id: 'RTCTransport_0_1', type: 'transport', selectedCandidatePairId: 'RTCIceCandidatePair_LXSb1WPo_W/AndM56' },
  { id: 'RTCIceCandidatePair_LXSb1WPo_W/AndM56', type: 'candidate-pair', localCandidateId: 'RTCIceCandidate_LXSb1WPo', remoteCandidateId: 'RTCIceCandidate_W/AndM56',
    state: 'succeeded', nominated: true, totalRoundTripTime: 0.002, currentRoundTripTime: 0, responsesReceived: 4 },
  { id: 'RTCIceCandidate_LXSb1WPo', type: 'local-candidate', candidateType: 'relay', relayProtocol: 'udp', url: 'turn:127.0.0.1:34519?transport=udp' },
  { id: 'RTCIceCandidate_W/AndM56', type: 'remote-candidate', candidateType: 'relay' },
];

test('the transport\'s selected pair: both ends host, its current round trip in ms', () => {
  assert.deepEqual(linkPathOf('w1', report(wrtcHost)), { peer: 'w1', local: 'host', remote: 'host', rttMs: 4.2 });
});

test('a relayed pair says how its candidate reaches TURN', () => {
  assert.deepEqual(linkPathOf('w2', report(wrtcRelay)), { peer: 'w2', local: 'relay', remote: 'relay', relayProtocol: 'udp', rttMs: 0 });
});

test('without relayProtocol the TURN server\'s URL tells it: turns: is TLS, transport=tcp is TCP', () => {
  const withUrl = (url: string) => wrtcRelay.map((e) => (e.type === 'local-candidate' ? { ...e, relayProtocol: undefined, url } : e));
  assert.equal(linkPathOf('p', report(withUrl('turns:turn.example:5349?transport=tcp')))?.relayProtocol, 'tls');
  assert.equal(linkPathOf('p', report(withUrl('turn:turn.example:3478?transport=tcp')))?.relayProtocol, 'tcp');
  assert.equal(linkPathOf('p', report(withUrl('turn:turn.example:3478')))?.relayProtocol, 'udp');
});

test('Firefox: no selectedCandidatePairId, the pair marked selected; legacy type names; mean round trip', () => {
  const firefox: StatsEntry[] = [
    { id: 't', type: 'transport' },
    { id: 'p1', type: 'candidate-pair', localCandidateId: 'l1', remoteCandidateId: 'r1', state: 'succeeded', nominated: true },
    { id: 'p2', type: 'candidate-pair', localCandidateId: 'l2', remoteCandidateId: 'r2', state: 'succeeded', selected: true, totalRoundTripTime: 0.09, responsesReceived: 3 },
    { id: 'l1', type: 'local-candidate', candidateType: 'host' },
    { id: 'r1', type: 'remote-candidate', candidateType: 'host' },
    { id: 'l2', type: 'local-candidate', candidateType: 'serverreflexive' },
    { id: 'r2', type: 'remote-candidate', candidateType: 'peerreflexive' },
  ];
  assert.deepEqual(linkPathOf('q', report(firefox)), { peer: 'q', local: 'srflx', remote: 'prflx', rttMs: 30 });
});

test('no pair chosen yet, or a candidate missing or of an unknown type: no path', () => {
  const waiting = wrtcHost.map((e) => (e.type === 'transport' ? { id: e.id, type: e.type } : e.type === 'candidate-pair' ? { ...e, nominated: false } : e));
  assert.equal(linkPathOf('w', report(waiting)), null);
  assert.equal(linkPathOf('w', report(wrtcHost.filter((e) => e.id !== 'RTCIceCandidate_SHCa5qnB'))), null);
  const odd = wrtcHost.map((e) => (e.id === 'RTCIceCandidate_VlWSUiMG' ? { ...e, candidateType: 'mdns' } : e));
  assert.equal(linkPathOf('w', report(odd)), null);
});
