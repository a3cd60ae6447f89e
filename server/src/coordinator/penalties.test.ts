import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PenaltyRecord } from '../store/store';
import { ADDRESS_OFFENCES, DEPARTURES_BEFORE_KEEP_OUT, KEEP_OUT_BASE_MS, KEEP_OUT_MAX_MS, Penalties } from './penalties';

test('an identity is kept out 10 s after a fault, doubling with each repeat up to an hour', () => {
  const p = new Penalties();
  assert.equal(p.punish('id-a', undefined, 'missed a deadline', 0, 'liveness'), KEEP_OUT_BASE_MS);
  assert.match(p.keptOut('id-a', undefined, 1, false)!, /kept out for 10 s more after 1 fault\(s\), the last: missed a deadline/);
  assert.equal(p.keptOut('id-a', undefined, KEEP_OUT_BASE_MS, false), null);
  assert.equal(p.punish('id-a', undefined, 'again', KEEP_OUT_BASE_MS, 'liveness'), 2 * KEEP_OUT_BASE_MS);
  for (let i = 0; i < 20; i++) p.punish('id-a', undefined, 'again', 0, 'liveness');
  assert.equal(p.punish('id-a', undefined, 'again', 0, 'liveness'), KEEP_OUT_MAX_MS);
  assert.equal(p.keptOut('id-b', undefined, 1, true), null, 'other identities are not affected');
});

test('fresh identities from one address: the address is kept out after the third integrity fault counted against it', () => {
  const p = new Penalties();
  for (let i = 1; i < ADDRESS_OFFENCES; i++) {
    p.punish(`liar-${i}`, '10.0.0.9', 'a refused checkpoint', 0, 'integrity');
    assert.equal(p.keptOut('established', '10.0.0.9', 1, false), null, `${i} fault(s): the address is still open`);
  }
  p.punish(`liar-${ADDRESS_OFFENCES}`, '10.0.0.9', 'a refused checkpoint', 0, 'integrity');
  assert.match(p.keptOut('established', '10.0.0.9', 1, false)!, /address kept out for 10 s more after 3 faults from it/);
  assert.equal(p.keptOut('newcomer', '10.0.0.10', 1, true), null);
});

test('a keep-out follows the network to newcomers (a new client id inherits it), not to identities with standing', () => {
  const p = new Penalties();
  p.punish('never-loads', '192.0.2.0/24', 'model load timed out', 0, 'liveness', true);
  assert.match(p.keptOut('fresh-id', '192.0.2.0/24', 1, true)!, /a member from your address is kept out for 10 s more \(model load timed out\)/);
  assert.equal(p.keptOut('established', '192.0.2.0/24', 1, false), null, 'standing is not washed away by a neighbour');
  assert.equal(p.keptOut('fresh-id', '198.51.100.0/24', 1, true), null, 'other networks are open');
  assert.equal(p.keptOut('fresh-id', '192.0.2.0/24', KEEP_OUT_BASE_MS, true), null, 'it ends with the keep-out');
  // Where every volunteer is one machine's, newcomers do not follow (it would shut out everyone).
  const local = new Penalties();
  local.punish('slow', '127.0.0.1', 'missed a deadline', 0, 'liveness', false);
  assert.equal(local.keptOut('fresh-id', '127.0.0.1', 1, true), null);
});

test('leaving mid-round is a light fault: counted each time, kept out from the third on', () => {
  const p = new Penalties();
  for (let i = 1; i < DEPARTURES_BEFORE_KEEP_OUT; i++) {
    assert.equal(p.punish('leaver', '192.0.2.0/24', 'left mid-round', 0, 'departure', true), 0);
    assert.equal(p.keptOut('leaver', '192.0.2.0/24', 1, true), null);
  }
  assert.equal(p.punish('leaver', '192.0.2.0/24', 'left mid-round', 0, 'departure', true), KEEP_OUT_BASE_MS);
  assert.match(p.keptOut('leaver', '192.0.2.0/24', 1, true)!, /kept out for 10 s more after 3 fault\(s\)/);
  assert.equal(p.offences('leaver'), DEPARTURES_BEFORE_KEEP_OUT);
});

test('each fault reports the records it changed, as one write; a Penalties restored from them refuses as the original did', () => {
  const writes: PenaltyRecord[][] = [];
  const p = new Penalties((records) => writes.push(records));
  p.punish('slow', '192.0.2.0/24', 'model load timed out', 0, 'liveness', true);
  assert.deepEqual(writes, [[
    { kind: 'identity', key: 'slow', offences: 1, until: KEEP_OUT_BASE_MS, reason: 'model load timed out' },
    { kind: 'newcomers', key: '192.0.2.0/24', offences: 0, until: KEEP_OUT_BASE_MS, reason: 'model load timed out' },
  ]]);
  for (let i = 1; i <= ADDRESS_OFFENCES; i++) p.punish(`liar-${i}`, '10.0.0.9', `lie ${i}`, 100, 'integrity');
  assert.deepEqual(writes.at(-1), [
    { kind: 'identity', key: `liar-${ADDRESS_OFFENCES}`, offences: 1, until: 100 + KEEP_OUT_BASE_MS, reason: `lie ${ADDRESS_OFFENCES}` },
    { kind: 'network', key: '10.0.0.9', offences: ADDRESS_OFFENCES, until: 100 + KEEP_OUT_BASE_MS, reason: `lie ${ADDRESS_OFFENCES}` },
  ]);
  p.punish('leaver', undefined, 'left mid-round', 0, 'departure');
  assert.deepEqual(writes.at(-1), [{ kind: 'departure', key: 'leaver', offences: 1, until: 0, reason: 'left mid-round' }]);

  // What a store would hold: the last write of each (kind, key).
  const stored = new Map(writes.flat().map((r) => [`${r.kind}:${r.key}`, r]));
  const restored = new Penalties();
  restored.restore([...stored.values()]);
  const asks: [string, string | undefined, boolean][] = [
    ['slow', '192.0.2.0/24', false], ['fresh', '192.0.2.0/24', true], ['established', '10.0.0.9', false], ['liar-1', undefined, false], ['other', '10.0.0.10', true],
  ];
  for (const at of [1, 50, KEEP_OUT_BASE_MS + 100]) {
    for (const [id, net, newcomer] of asks) assert.equal(restored.keptOut(id, net, at, newcomer), p.keptOut(id, net, at, newcomer), `${id} at ${at}`);
  }
  assert.match(restored.keptOut('established', '10.0.0.9', 100, false)!, /address kept out for 10 s more after 3 faults from it, the last: lie 3/);
  assert.equal(restored.keptOut('established', '10.0.0.9', 100 + KEEP_OUT_BASE_MS, false), null, 'expired keep-outs end');
  assert.equal(restored.offences('leaver'), 1);
});

test('counts restored after their keep-out ended still set the next one: the backoff goes on where it stopped', () => {
  const p = new Penalties();
  p.restore([{ kind: 'identity', key: 'repeat', offences: 3, until: 5_000, reason: 'missed a deadline' }]);
  assert.equal(p.keptOut('repeat', undefined, 5_000, false), null);
  assert.equal(p.punish('repeat', undefined, 'again', 10_000, 'liveness'), 8 * KEEP_OUT_BASE_MS, 'the fourth fault: 2^3 × the base');
  const d = new Penalties();
  d.restore([{ kind: 'departure', key: 'leaver', offences: DEPARTURES_BEFORE_KEEP_OUT - 1, until: 0, reason: 'left mid-round' }]);
  assert.equal(d.punish('leaver', undefined, 'left mid-round', 0, 'departure'), KEEP_OUT_BASE_MS, 'the departures counted before are not forgotten');
});
