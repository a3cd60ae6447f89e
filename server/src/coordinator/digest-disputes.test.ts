import assert from 'node:assert/strict';
import { test } from 'node:test';
import { settleDigestDisputes, type DigestDispute } from './digest-disputes';
import type { DigestMismatch } from './group-check';

const members = ['s', 'a', 'b', 'c'];
const contribution = (from: string, to: string): DigestMismatch => ({ kind: 'contribution', from, to, part: members.indexOf(to) });
const dispute = (owner: string, ownerAggregate: string, mismatches: DigestMismatch[]): DigestDispute => ({ part: members.indexOf(owner), owner, ownerAggregate, mismatches });
const noStanding = () => false;
const byId = { members, of: (id: string) => id };

test('an owner whose aggregate is the recomputed one lied about its receipt', () => {
  const v = settleDigestDisputes([dispute('a', 'truth-a', [contribution('s', 'a')])], new Map([[1, 'truth-a']]), () => 'x', 'x', noStanding, byId);
  assert.deepEqual([v.liars, v.unresolved], [['a'], []]);
});

test('a sender every other member contradicts (it sent each owner other values than it reports) is convicted; its owners are not', () => {
  const ds = ['a', 'b', 'c'].map((o) => dispute(o, `agg-${o}`, [contribution('s', o)]));
  const v = settleDigestDisputes(ds, new Map(['a', 'b', 'c'].map((o) => [members.indexOf(o), `truth-${o}`])), () => 'x', 'x', noStanding, byId);
  assert.deepEqual([v.liars, v.unresolved], [['s'], []]);
});

test('two accusers of one network against one sender: nobody convicted, all three sit out; standing decides against a newcomer', () => {
  const ds = ['a', 'b'].map((o) => dispute(o, `agg-${o}`, [contribution('s', o)]));
  const truth = new Map(['a', 'b'].map((o) => [members.indexOf(o), `truth-${o}`]));
  const networks = { members, of: (id: string) => (id === 'a' || id === 'b' ? 'net-ab' : `net-${id}`) };
  const v = settleDigestDisputes(ds, truth, () => 'x', 'x', noStanding, networks);
  assert.deepEqual(v.liars, []);
  assert.deepEqual(v.unresolved, [['s', 'a'], ['s', 'b']]);
  const withStanding = settleDigestDisputes(ds, truth, () => 'x', 'x', (id) => id === 's', networks);
  assert.deepEqual([withStanding.liars.sort(), withStanding.unresolved], [['a', 'b'], []]);
});
