// The draw of validated parts: a part's chance of being checked never depends on who else is in the
// group, so an owner with standing cannot tell from the group's probationers that it is safe to lie.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { VALIDATED_PART_SHARE, checksFor, mulberry32 } from '@tabfleet/protocol';
import { drawChecks } from './validation-draw';

const DRAWS = 20_000;
const members = Array.from({ length: 16 }, (_, i) => `m${i}`);
const STANDING_OWNER = 'm0';

/** How often the part of `m0` (standing) is drawn, with the next `probationers` members on probation. */
function checkRate(draw: typeof drawChecks, probationers: number, seed: number): number {
  const probation = new Set(members.slice(1, 1 + probationers));
  const rand = mulberry32(seed);
  let checked = 0;
  for (let i = 0; i < DRAWS; i++) if (draw(members, rand, probation).some((c) => members[c.part] === STANDING_OWNER)) checked++;
  return checked / DRAWS;
}

test('an owner with standing is checked at VALIDATED_PART_SHARE whatever the group\'s probationers (protocol\'s probation-first draw: never, with 4 of them)', () => {
  for (const probationers of [0, 2, 4, 8, 15]) {
    const rate = checkRate(drawChecks, probationers, 7 + probationers);
    const before = checkRate(checksFor, probationers, 7 + probationers);
    console.log(`16 members, ${probationers} on probation: a standing owner's part checked in ${rate.toFixed(4)} of rounds (probation first: ${before.toFixed(4)})`);
    // 20,000 draws: the standard error is 0.003; 0.015 is five of them.
    assert.ok(Math.abs(rate - VALIDATED_PART_SHARE) < 0.015, `${probationers} on probation: ${rate}`);
    if (probationers >= 4) assert.equal(before, 0, 'what the adaptive owner relied on');
  }
});

test('every probationer\'s part is checked, never by its owner, on another network where there is one', () => {
  const probation = new Set(members.slice(0, 6));
  const net = (id: string) => Number(id.slice(1)) % 3;
  const rand = mulberry32(11);
  let probationerChecked = 0;
  for (let i = 0; i < DRAWS; i++) {
    const checks = drawChecks(members, rand, probation, (a, b) => net(a) === net(b));
    const parts = checks.map((c) => c.part);
    assert.equal(new Set(parts).size, parts.length, 'a part is checked once');
    for (const id of probation) assert.ok(parts.includes(members.indexOf(id)), `${id} on probation was not checked`);
    for (const c of checks) {
      assert.notEqual(members[c.part], c.validator);
      assert.notEqual(net(members[c.part]), net(c.validator));
    }
    if (parts.includes(0)) probationerChecked++;
  }
  assert.equal(probationerChecked, DRAWS);
  assert.deepEqual(drawChecks(['alone'], rand, new Set(['alone'])), []);
});
