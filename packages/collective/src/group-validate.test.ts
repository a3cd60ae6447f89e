// Group validation (Group.validate): validators recompute named parts from the members'
// contributions with the owner's code, so an owner that combined its part wrongly but reports it
// consistently, which the average's digests cannot show, disagrees with its validator.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeFrame, type Aggregation, type PartCheck } from '@tabfleet/protocol';
import { CollectiveError } from './errors';
import type { GroupAverage, GroupAverageOptions } from './group';
import { floatData, memoryGroup, settleAll, sparseData, type TestGroup } from './testing';

async function averageThenValidate(g: TestGroup, inputs: Float32Array[], checks: PartCheck[], opts: GroupAverageOptions, ownerRule: (i: number) => Aggregation = () => opts.rule) {
  const averages: GroupAverage[] = await Promise.all(g.groups.map((x, i) => x.average(inputs[i], { ...opts, rule: ownerRule(i) })));
  const validations = await Promise.all(g.groups.map((x, i) => x.validate(averages[i].contribution, checks, opts)));
  return { averages, validations };
}

const cases: { name: string; opts: GroupAverageOptions; data: (i: number) => Float32Array }[] = [
  { name: 'dense f32', opts: { rule: 'centered-clip' }, data: (i) => floatData(5003, i + 10) },
  { name: 'dense f16', opts: { rule: 'trimmed-mean', dtype: 'f16' }, data: (i) => floatData(5003, i + 20) },
  { name: 'sparse f16', opts: { rule: 'median', dtype: 'f16', sparse: true }, data: (i) => sparseData(20_000, 300, i + 30) },
  { name: 'int8 contributions', opts: { rule: 'centered-clip', dtype: 'f16', quantized: 'int8' }, data: (i) => floatData(5003, i + 40) },
  { name: 'e2m1 contributions', opts: { rule: 'trimmed-mean', dtype: 'f16', quantized: 'e2m1' }, data: (i) => floatData(5003, i + 50) },
];
for (const c of cases) {
  test(`honest members: each validator's digests equal the owner's (${c.name})`, async () => {
    const g = memoryGroup(5, { chunkElements: 300 });
    const checks = [{ part: 1, validator: 'm3' }, { part: 4, validator: 'm0' }, { part: 0, validator: 'm3' }];
    const { averages, validations } = await averageThenValidate(g, g.ids.map((_, i) => c.data(i)), checks, c.opts);
    assert.deepEqual(validations.map((v) => v.map((x) => x.part).sort()), [[4], [], [], [0, 1], []]);
    for (const [i, list] of validations.entries()) {
      for (const v of list) {
        const owner = averages[v.part];
        assert.equal(v.aggregate, owner.digests.aggregate, `validator m${i} of part ${v.part}`);
        assert.deepEqual(v.received, owner.digests.received);
        assert.deepEqual(v.refused, owner.refused);
      }
    }
  });
}

test('an owner that combines its part by another rule reports consistent digests, and its validator disagrees', async () => {
  const g = memoryGroup(5);
  const honest = Array.from({ length: 4 }, (_, i) => floatData(2000, i + 40).map((v) => 0.01 * v + 0.05));
  const inputs = [...honest, honest[0].map((v) => -8 * v)];
  // m2 is lazy or lying: a plain mean where the job says centered-clip.
  const { averages, validations } = await averageThenValidate(g, inputs, [{ part: 2, validator: 'm4' }, { part: 1, validator: 'm2' }], { rule: 'centered-clip' },
    (i) => (i === 2 ? 'mean' : 'centered-clip'));
  for (const a of averages) assert.equal(a.digests.gathered[2], averages[2].digests.aggregate, 'every receiver got what m2 reports: no digest shows it');
  const [forPart2] = validations[4];
  assert.deepEqual(forPart2.received, averages[2].digests.received);
  assert.notEqual(forPart2.aggregate, averages[2].digests.aggregate);
  assert.equal(validations[2][0].aggregate, averages[1].digests.aggregate, 'the liar still validates honestly what it is given');
});

test('validation bytes: each sender sends the validator one part, nobody else sends anything', async () => {
  const g = memoryGroup(4);
  const averages = await Promise.all(g.groups.map((x, i) => x.average(floatData(4000, i), { rule: 'mean' })));
  const before = g.groups.map((x) => x.counters.bytesOut);
  await Promise.all(g.groups.map((x, i) => x.validate(averages[i].contribution, [{ part: 3, validator: 'm1' }], { rule: 'mean' })));
  const sent = g.groups.map((x, i) => x.counters.bytesOut - before[i]);
  assert.equal(sent[1], 0, 'the validator sends nothing');
  for (const i of [0, 2, 3]) assert.ok(sent[i] >= 4 * 1000 && sent[i] < 4 * 1000 + 200, `m${i} sent ${sent[i]}`);
});

test('bad checks are refused before anything is sent: an owner validating its own part, a part twice, a stranger', () => {
  const g = memoryGroup(3);
  const v = new Float32Array(30);
  assert.throws(() => g.groups[0].validate(v, [{ part: 1, validator: 'm1' }], { rule: 'mean' }), /it is the owner/);
  assert.throws(() => g.groups[0].validate(v, [{ part: 1, validator: 'm0' }, { part: 1, validator: 'm2' }], { rule: 'mean' }), /checked twice/);
  assert.throws(() => g.groups[0].validate(v, [{ part: 0, validator: 'x' }], { rule: 'mean' }), /not a member/);
  assert.throws(() => g.groups[0].validate(v, [{ part: 3, validator: 'm1' }], { rule: 'mean' }), /part 3 of a 3-member group/);
});

test('a validation frame for a part the receiver does not validate fails the op as bad_frame from its sender', async () => {
  const g = memoryGroup(3);
  const averages = await Promise.all(g.groups.map((x, i) => x.average(floatData(300, i), { rule: 'mean' })));
  const send = g.transports[2].send.bind(g.transports[2]);
  g.transports[2].send = (peer, frame) => {
    const copy = frame.slice();
    if (decodeFrame(frame).kind === 'groupValidate') new DataView(copy.buffer).setUint16(18, 2, true); // part 2, validated by nobody
    return send(peer, copy);
  };
  const results = await settleAll(g.groups.map((x, i) => x.validate(averages[i].contribution, [{ part: 0, validator: 'm1' }], { rule: 'mean' })));
  assert.ok(results.some((r) => r instanceof CollectiveError && r.code === 'bad_frame' && r.member === 'm2'), results.map(String).join(' | '));
});
