import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PROBATION_VERIFIED } from '@tabfleet/protocol';
import { hasStanding, networkOf, networkWouldDominate, seatsFrom } from './standing';

test('networkOf: /24 and /48 by default, IPv4-mapped IPv6 as IPv4, the address itself without rules', () => {
  const rules = { v4: 24, v6: 48 };
  assert.equal(networkOf('192.0.2.77', rules), '192.0.2.0/24');
  assert.equal(networkOf('::ffff:198.51.100.9', rules), '198.51.100.0/24');
  assert.equal(networkOf('2001:db8:1:2::5', rules), '2001:db8:1:0:0:0:0:0/48');
  assert.equal(networkOf('2001:db8:1:ff00::5', { v4: 32, v6: 56 }), '2001:db8:1:ff00:0:0:0:0/56');
  assert.equal(networkOf('127.0.0.3', { v4: 32, v6: 128 }), '127.0.0.3/32');
  assert.equal(networkOf('127.0.0.3', false), '127.0.0.3');
  assert.equal(networkOf(undefined, rules), 'unknown');
});

test('standing: only after PROBATION_VERIFIED confirmations since the last fault', () => {
  assert.equal(hasStanding(null), false);
  assert.equal(hasStanding({ verifiedSinceFault: PROBATION_VERIFIED - 1 }), false);
  assert.equal(hasStanding({ verifiedSinceFault: PROBATION_VERIFIED }), true);
});

test('seatsFrom: never two seats from one network, members with standing first', () => {
  const xs = [{ id: 'a', net: 'n1', s: false }, { id: 'b', net: 'n1', s: true }, { id: 'c', net: 'n2', s: false }, { id: 'd', net: 'n3', s: false }];
  assert.deepEqual(seatsFrom(xs, 3, (x) => x.net).map((x) => x.id), ['a', 'c', 'd']);
  assert.deepEqual(seatsFrom(xs, 3, (x) => x.net, (x) => x.s).map((x) => x.id), ['b', 'c', 'd']);
  assert.deepEqual(seatsFrom(xs, 3, (x) => x.net, undefined, ['n2']).map((x) => x.id), ['a', 'd']);
});

test('a network is never a majority of a job: its first member joins, a second needs two others', () => {
  assert.equal(networkWouldDominate(0, 0), false);
  assert.equal(networkWouldDominate(1, 1), true);
  assert.equal(networkWouldDominate(1, 2), true);
  assert.equal(networkWouldDominate(1, 3), false);
  assert.equal(networkWouldDominate(2, 4), true);
  assert.equal(networkWouldDominate(2, 5), false);
});
