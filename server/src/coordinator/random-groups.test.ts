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

test('ids a volunteer picks do not place it: any two members share a group about as often as chance says, whatever their ids', () => {
  // 48 members in 3 groups of 16: two given members share a group with probability 15/47 ≈ 0.32.
  // Sybils rejoining under ids next to each other (or next to a victim's) gain nothing.
  const members = [...ids(8, 'sybil-'), ...ids(40, 'honest-')];
  const draws = 2000;
  let sybilPair = 0;
  let mixedPair = 0;
  let most = 0;
  for (let d = 0; d < draws; d++) {
    const { groups } = randomGroups(members, 16);
    const groupOf = (id: string) => groups.findIndex((g) => g.includes(id));
    if (groupOf('sybil-0') === groupOf('sybil-1')) sybilPair++;
    if (groupOf('sybil-0') === groupOf('honest-39')) mixedPair++;
    most += Math.max(...groups.map((g) => g.filter((id) => id.startsWith('sybil')).length));
  }
  // About 6 standard deviations of room either side; ids that decided the draw (a rate of 0 or 1) fail.
  for (const [what, n] of [['two sybils', sybilPair], ['a sybil and an honest member', mixedPair]] as const) {
    assert.ok(Math.abs(n / draws - 15 / 47) < 0.06, `${what} shared a group in ${n} of ${draws} draws`);
  }
  // 8 Sybils among 48 in 3 groups: the most in one group averages about 4 (hypergeometric), never 8.
  assert.ok(most / draws < 5, `the Sybils' largest share of a group averaged ${most / draws}`);
});
