// A link's kind, the links among members counted once, and a member's links in words.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeLinks, linkPathsSchema, pathKindOf, summarizeLinks, type LinkPath } from './link-paths';

test('a link is the farthest rung either end took: relay, then srflx, prflx, host', () => {
  assert.equal(pathKindOf('host', 'host'), 'host');
  assert.equal(pathKindOf('host', 'prflx'), 'prflx');
  assert.equal(pathKindOf('prflx', 'srflx'), 'srflx');
  assert.equal(pathKindOf('srflx', 'relay', 'host'), 'relay');
});

test('both ends\' reports make one link; its relay protocols are its relaying ends\'; non-members are left out', () => {
  const members = new Set(['a', 'b', 'c']);
  const s = summarizeLinks([
    // b sees a's relayed end as prflx; a knows it relays over TLS.
    { volunteerId: 'a', links: [{ peer: 'b', local: 'relay', remote: 'srflx', relayProtocol: 'tls', rttMs: 80 }, { peer: 'gone', local: 'host', remote: 'host', rttMs: 1 }] },
    { volunteerId: 'b', links: [{ peer: 'a', local: 'srflx', remote: 'prflx', rttMs: 81 }, { peer: 'c', local: 'host', remote: 'host', rttMs: 0.2 }] },
    { volunteerId: 'gone', links: [{ peer: 'c', local: 'relay', remote: 'relay', relayProtocol: 'udp', rttMs: 3 }] },
  ], (id) => members.has(id));
  assert.deepEqual(s, { total: 2, direct: 1, relayed: 1, relayedShare: 0.5, byKind: { host: 1, srflx: 0, prflx: 0, relay: 1 }, relayProtocols: { udp: 0, tcp: 0, tls: 1 } });
  assert.equal(summarizeLinks([], () => true).relayedShare, null);
});

test('a member\'s links in words', () => {
  const l = (local: LinkPath['local'], remote: LinkPath['remote'], relayProtocol?: LinkPath['relayProtocol']): LinkPath =>
    ({ peer: 'p', local, remote, rttMs: null, ...(relayProtocol ? { relayProtocol } : {}) });
  assert.equal(describeLinks([]), '—');
  assert.equal(describeLinks([l('host', 'host'), l('srflx', 'prflx')]), 'direct (host, srflx)');
  assert.equal(describeLinks([l('relay', 'relay', 'udp')]), 'relayed (TURN over udp)');
  assert.equal(describeLinks([l('srflx', 'relay')]), 'relayed (TURN)');
  assert.equal(describeLinks([l('host', 'host'), l('relay', 'srflx', 'tcp')]), '1 direct (host), 1 relayed (TURN over tcp)');
  // The peer relays, which this end saw as a reflexive candidate: the peer's own report says so.
  assert.equal(describeLinks([l('host', 'prflx')], () => l('relay', 'host', 'tls')), 'relayed (TURN over tls)');
  assert.equal(describeLinks([l('host', 'prflx')], () => undefined), 'direct (prflx)');
});

test('a report names each peer once, at most 64 of them, relayProtocol only for a relayed local end', () => {
  const ok = { peer: 'p', local: 'host', remote: 'host', rttMs: 1 };
  assert.equal(linkPathsSchema.safeParse([ok]).success, true);
  assert.equal(linkPathsSchema.safeParse([ok, ok]).success, false);
  assert.equal(linkPathsSchema.safeParse(Array.from({ length: 65 }, (_, i) => ({ ...ok, peer: `p${i}` }))).success, false);
  assert.equal(linkPathsSchema.safeParse([{ ...ok, relayProtocol: 'udp' }]).success, false);
  assert.equal(linkPathsSchema.safeParse([{ ...ok, local: 'relay', relayProtocol: 'udp' }]).success, true);
  assert.equal(linkPathsSchema.safeParse([{ ...ok, rttMs: Infinity }]).success, false);
});
