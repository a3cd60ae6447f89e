import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ADDRESS_OFFENCES, KEEP_OUT_BASE_MS, KEEP_OUT_MAX_MS, Penalties } from './penalties';

test('an identity is kept out 10 s after a fault, doubling with each repeat up to an hour', () => {
  const p = new Penalties();
  assert.equal(p.punish('id-a', undefined, 'missed a deadline', 0), KEEP_OUT_BASE_MS);
  assert.match(p.keptOut('id-a', undefined, 1)!, /kept out for 10 s more after 1 fault\(s\), the last: missed a deadline/);
  assert.equal(p.keptOut('id-a', undefined, KEEP_OUT_BASE_MS), null);
  assert.equal(p.punish('id-a', undefined, 'again', KEEP_OUT_BASE_MS), 2 * KEEP_OUT_BASE_MS);
  for (let i = 0; i < 20; i++) p.punish('id-a', undefined, 'again', 0);
  assert.equal(p.punish('id-a', undefined, 'again', 0), KEEP_OUT_MAX_MS);
  assert.equal(p.keptOut('id-b', undefined, 1), null, 'other identities are not affected');
});

test('fresh identities from one address: the address is kept out after the third fault counted against it', () => {
  const p = new Penalties();
  for (let i = 1; i < ADDRESS_OFFENCES; i++) {
    p.punish(`liar-${i}`, '10.0.0.9', 'a refused checkpoint', 0);
    assert.equal(p.keptOut('newcomer', '10.0.0.9', 1), null, `${i} fault(s): the address is still open`);
  }
  p.punish(`liar-${ADDRESS_OFFENCES}`, '10.0.0.9', 'a refused checkpoint', 0);
  assert.match(p.keptOut('newcomer', '10.0.0.9', 1)!, /address kept out for 10 s more after 3 faults from it/);
  assert.equal(p.keptOut('newcomer', '10.0.0.10', 1), null);
});
