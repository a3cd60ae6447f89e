// A simulated group round computed with the runtime's rules: a ×1e6 contribution is refused by every
// owner, a sign-flipped one passes the screen and is bounded by centered clip, and a lying owner's
// digests all agree, so only a validator's recomputation of its part shows the lie.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { jobSpecSchema, modelDigest } from '@tabfleet/protocol';
import { evidenceOf, groupRound, validatePart, type Attack } from './simulated-group';

const spec = jobSpecSchema.parse({ preset: 'gpt', dataset: 'text-corpus', gpt: { layers: 1, heads: 1, width: 8, context: 8 }, strategy: 'localsgd', trust: 'untrusted',
  groupSize: 16, pacing: 'fixed', maxWorkers: 64, minWorkers: 8 });
const members = (attacks: (Attack | null)[]) => attacks.map((attack, i) => ({ id: `m${i}`, params: Float32Array.from({ length: 64 }, (_, k) => 1 + ((i * 7 + k) % 5) / 10), attack }));

test('every owner refuses a ×1e6 contribution, and the mean stays among the honest values', () => {
  const g = groupRound(members([null, null, null, null, null, 'scale']), spec);
  for (const id of g.members) assert.deepEqual(g.reports.get(id)!.refused.map((r) => r.member), ['m5'], id);
  assert.ok(g.mean!.every((v) => v >= 1 && v <= 1.4), `${g.mean!.slice(0, 8)}`);
});

test('a sign-flipped contribution passes the screen; centered clip bounds its pull', () => {
  const ms = members([null, null, null, null, null, 'sign-flip']);
  const g = groupRound(ms, spec);
  for (const id of g.members) assert.deepEqual(g.reports.get(id)!.refused, []);
  // Per value: the plain mean (the flipped value −x included) would pull from the honest mean by d; centered clip pulls less than half of that.
  g.mean!.forEach((v, k) => {
    const honest = ms.slice(0, 5).reduce((a, m) => a + m.params[k], 0) / 5;
    const plain = (honest * 5 - ms[5].params[k]) / 6;
    assert.ok(Math.abs(v - honest) < Math.abs(plain - honest) / 2, `value ${k}: ${v}, honest mean ${honest}, plain mean ${plain}`);
  });
});

test('a lying owner: every digest agrees, its validator recomputes another aggregate, and the evidence is what each member reported sending', () => {
  const g = groupRound(members([null, null, 'wrong-aggregate', null]), spec);
  const reports = g.members.map((id) => g.reports.get(id)!);
  for (const r of reports) assert.deepEqual(r.digests.gathered, reports.map((x) => x.digests.aggregate));
  reports.forEach((r, i) => reports.forEach((o, j) => assert.equal(r.digests.sent[j], o.digests.received[i])));
  assert.notEqual(validatePart(g, 2, spec).aggregate, reports[2].digests.aggregate);
  assert.equal(validatePart(g, 1, spec).aggregate, reports[1].digests.aggregate);
  assert.deepEqual(validatePart(g, 2, spec).received, reports.map((r) => r.digests.sent[2]));
  const evidence = evidenceOf(g, 'm3', 2);
  assert.equal(modelDigest(new Float32Array(evidence.buffer)), reports[3].digests.sent[2]);
});
