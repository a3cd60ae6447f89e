import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RoundBegin } from '@tabfleet/protocol';
import { GroupedSync, type SyncBegin } from './grouped-sync';

const COMMON: SyncBegin = { jobId: 'j', seq: 3, mode: 'group', began: 1_000, deadline: 11_000, uploader: null, evaluators: [] };

function drawnSync() {
  const sent: { to: string[]; payload: RoundBegin }[] = [];
  const gs = new GroupedSync(['a', 'b', 'c', 'd', 'e', 'f'], 3, 3, 1, 100, { drawn: [['a', 'b', 'c'], ['d', 'e', 'f']] });
  gs.announce(COMMON, { a: 4, b: 5, c: 6, d: 1, e: 2, f: 3 }, (to, _event, payload) => sent.push({ to, payload }));
  return { gs, sent };
}

test('drawn groups reserve a rerun id each: the sync\'s ids end past them, so a restarted server never hands one out', () => {
  const { gs, sent } = drawnSync();
  assert.deepEqual(sent.map((x) => x.payload.roundId), [100, 101]);
  assert.deepEqual(sent[0].payload.steps, { a: 4, b: 5, c: 6 });
  assert.equal(gs.lastRoundId, 103);
  // Groups the server did not draw (trusted Moshpit) reserve none.
  assert.equal(new GroupedSync(['a', 'b', 'c', 'd'], 3, 2, 1, 100).lastRoundId, 101);
});

test('a checked group runs once more without its liar, under its reserved id; the old id is stale, and it never runs a third time', () => {
  const { gs, sent } = drawnSync();
  gs.state[0] = 'failed';
  assert.equal(gs.canRerun(0, ['a', 'c'], 2_000), true);
  assert.equal(gs.rerun(0, ['a', 'c'], (to, _event, payload) => sent.push({ to, payload })), 102);
  assert.deepEqual(sent[2].to, ['a', 'c']);
  assert.deepEqual({ members: sent[2].payload.members, quorum: sent[2].payload.quorum, steps: sent[2].payload.steps }, { members: ['a', 'c'], quorum: 2, steps: { a: 4, c: 6 } });
  assert.equal(gs.state[0], 'running');
  assert.equal(gs.groupIn('a', 102), 0);
  assert.equal(gs.groupIn('a', 100), undefined, 'the first round id is stale');
  assert.equal(gs.groupOf('b'), undefined, 'the liar is no longer in the sync');
  assert.equal(gs.groupOfRound(102), 0);
  gs.state[0] = 'failed';
  assert.equal(gs.canRerun(0, ['a', 'c'], 2_000), false, 'once only');
});

test('no rerun of one member, nor when less time is left before the deadline than the sync has taken', () => {
  const { gs } = drawnSync();
  assert.equal(gs.canRerun(1, ['d'], 2_000), false);
  assert.equal(gs.canRerun(1, ['d', 'e'], 6_000), true, '5 s taken, 5 s left');
  assert.equal(gs.canRerun(1, ['d', 'e'], 6_001), false);
  assert.equal(new GroupedSync(['a', 'b', 'c', 'd'], 3, 2, 1, 100).canRerun(0, ['a', 'b'], 1_000), false, 'trusted groups do not rerun');
});
