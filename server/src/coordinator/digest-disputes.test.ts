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
  const v = settleDigestDisputes([dispute('a', 'truth-a', [contribution('s', 'a')])], new Map([[1, 'truth-a']]), () => 'x', noStanding, byId);
  assert.deepEqual([v.liars, v.unresolved], [['a'], []]);
});

test('a sender every other member contradicts (it sent each owner other values than it reports) is convicted; its owners are not', () => {
  const ds = ['a', 'b', 'c'].map((o) => dispute(o, `agg-${o}`, [contribution('s', o)]));
  const v = settleDigestDisputes(ds, new Map(['a', 'b', 'c'].map((o) => [members.indexOf(o), `truth-${o}`])), () => 'x', noStanding, byId);
  assert.deepEqual([v.liars, v.unresolved], [['s'], []]);
});

test('two accusers of one network against one sender: nobody convicted, all three sit out; standing decides against a newcomer', () => {
  const ds = ['a', 'b'].map((o) => dispute(o, `agg-${o}`, [contribution('s', o)]));
  const truth = new Map(['a', 'b'].map((o) => [members.indexOf(o), `truth-${o}`]));
  const networks = { members, of: (id: string) => (id === 'a' || id === 'b' ? 'net-ab' : `net-${id}`) };
  const v = settleDigestDisputes(ds, truth, () => 'x', noStanding, networks);
  assert.deepEqual(v.liars, []);
  assert.deepEqual(v.unresolved, [['s', 'a'], ['s', 'b']]);
  const withStanding = settleDigestDisputes(ds, truth, () => 'x', (id) => id === 's', networks);
  assert.deepEqual([withStanding.liars.sort(), withStanding.unresolved], [['a', 'b'], []]);
});

test('an owner that sends every receiver other values than the aggregate it reports is convicted, not the receivers that agree with each other', () => {
  // A group of 3: owner j reports the recomputed aggregate but sent k1 and k2 its negation; they gathered
  // the same wrong part, so their two models agree (the group's majority) and differ from j's.
  const group = ['j', 'k1', 'k2'];
  const aggregate = (to: string): DigestMismatch => ({ kind: 'aggregate', from: 'j', to, part: 0 });
  const checksums: Record<string, string> = { j: 'model-from-truth', k1: 'model-from-negation', k2: 'model-from-negation' };
  const v = settleDigestDisputes([{ part: 0, owner: 'j', ownerAggregate: 'truth-j', mismatches: [aggregate('k1'), aggregate('k2')] }], new Map([[0, 'truth-j']]),
    (id) => checksums[id], noStanding, { members: group, of: (id: string) => id });
  assert.deepEqual([v.liars, v.unresolved], [['j'], []]);
});

test('a receiver that says it gathered another aggregate, yet ended with the model of a member who gathered the reported one, lied', () => {
  const group = ['j', 'k1', 'k2'];
  const checksums: Record<string, string> = { j: 'm', k1: 'm', k2: 'm' };
  const v = settleDigestDisputes([{ part: 0, owner: 'j', ownerAggregate: 'truth-j', mismatches: [{ kind: 'aggregate', from: 'j', to: 'k1', part: 0 }] }],
    new Map([[0, 'truth-j']]), (id) => checksums[id], noStanding, { members: group, of: (id: string) => id });
  assert.deepEqual([v.liars, v.unresolved], [['k1'], []]);
});

test('in a group of 2 a disputed part is word against word: nobody is convicted, both sit out (one voice is not most of the others)', () => {
  const pair = ['j', 'k'];
  const checksums: Record<string, string> = { j: 'model-from-truth', k: 'model-from-negation' };
  const v = settleDigestDisputes([{ part: 0, owner: 'j', ownerAggregate: 'truth-j', mismatches: [{ kind: 'aggregate', from: 'j', to: 'k', part: 0 }] }],
    new Map([[0, 'truth-j']]), (id) => checksums[id], noStanding, { members: pair, of: (id: string) => id });
  assert.deepEqual([v.liars, v.unresolved], [[], [['j', 'k']]]);
});
