import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mulberry32 } from './random';
import { VALIDATED_PART_SHARE, checksFor } from './validation';

test('checks: distinct parts, never validated by their owner, VALIDATED_PART_SHARE of the parts on average', () => {
  const rand = mulberry32(7);
  for (const n of [2, 3, 4, 5, 8, 16]) {
    const members = Array.from({ length: n }, (_, i) => `m${i}`);
    let parts = 0;
    const rounds = 4000;
    for (let r = 0; r < rounds; r++) {
      const checks = checksFor(members, rand);
      assert.ok(checks.length >= 1 && checks.length <= n);
      assert.equal(new Set(checks.map((c) => c.part)).size, checks.length, 'distinct parts');
      for (const c of checks) assert.notEqual(members[c.part], c.validator, 'the owner never validates its part');
      if (checks.length < n) assert.equal(new Set(checks.map((c) => c.validator)).size, checks.length, 'one part per validator while there are enough');
      parts += checks.length;
    }
    const share = parts / rounds / n;
    const expected = Math.max(1, VALIDATED_PART_SHARE * n) / n;
    assert.ok(Math.abs(share - expected) < 0.02, `n=${n}: ${share} of parts checked, expected ${expected}`);
  }
  assert.deepEqual(checksFor(['alone']), []);
});

test('checksFor: a validator on another network than the part owner wherever the group has one', () => {
  const members = ['a1', 'a2', 'b1', 'c1'];
  const net = (id: string) => id[0];
  for (let seed = 1; seed <= 50; seed++) {
    let x = seed;
    const rand = () => ((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (const c of checksFor(members, rand, new Set(members), (p, q) => net(p) === net(q))) {
      assert.notEqual(net(c.validator), net(members[c.part]), `seed ${seed}: part ${c.part} validated by ${c.validator}`);
    }
  }
});
