import assert from 'node:assert/strict';
import { test } from 'node:test';
import { randomGroups } from './random-groups';

const ids = (n: number, prefix = 'v') => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

test('members split into groups of at most the size, sizes within one, everyone once, and different groups on every draw', () => {
  const members = ids(40);
  const seen = new Set<string>();
  for (let draw = 0; draw < 20; draw++) {
    const { groups, leftOut } = randomGroups(members, 16);
    assert.equal(groups.length, 3);
    assert.deepEqual(leftOut, []);
    const sizes = groups.map((g) => g.length);
    assert.ok(Math.max(...sizes) <= 16 && Math.max(...sizes) - Math.min(...sizes) <= 1, `sizes ${sizes}`);
    assert.deepEqual(groups.flat().sort(), [...members].sort());
    seen.add(groups.map((g) => [...g].sort().join('+')).sort().join('|'));
  }
  assert.ok(seen.size >= 19, `only ${seen.size} different splits in 20 draws`);
});

test('a network is never more than half of a group: it is spread round the groups, and a surplus no spread absorbs sits out', () => {
  // 12 of 40 members from one network, in 3 groups: at most 4 in any group.
  const members = [...ids(12, 'sybil'), ...ids(28, 'honest')];
  const networkOf = (id: string) => (id.startsWith('sybil') ? 'net-s' : id);
  for (let draw = 0; draw < 50; draw++) {
    const { groups, leftOut } = randomGroups(members, 16, networkOf);
    assert.deepEqual(leftOut, []);
    for (const g of groups) assert.ok(g.filter((id) => id.startsWith('sybil')).length <= 4, g.join(' '));
  }
  // 10 of 12 in one network (admission would not let it in, but others may have left): its surplus sits out.
  const crowded = [...ids(10, 'sybil'), 'a', 'b'];
  const { groups, leftOut } = randomGroups(crowded, 6, networkOf);
  for (const g of groups) assert.ok(g.filter((id) => id.startsWith('sybil')).length * 2 <= g.length, g.join(' '));
  assert.equal(groups.flat().length + leftOut.length, 12);
  assert.ok(leftOut.every((id) => id.startsWith('sybil')) && leftOut.length >= 6, leftOut.join(' '));
  // A job of one network has nobody to outvote: nobody sits out; nor does a member alone in its group.
  assert.deepEqual(randomGroups(ids(5, 'sybil'), 4, networkOf).leftOut, []);
  const three = randomGroups(['a', 'b', 'c'], 2, (id) => id);
  assert.deepEqual([three.groups.map((g) => g.length).sort(), three.leftOut], [[1, 2], []]);
});
