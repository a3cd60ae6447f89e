import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_SKIPPED_SYNCS, PathFallback } from './path-fallback';

test('peers that never link are tried again after 1, 2, 4, … star syncs, not every sync', () => {
  const path = new PathFallback();
  const attempts: number[] = [];
  for (let sync = 0; sync < 200; sync++) {
    if (!path.useStar) {
      attempts.push(sync);
      path.peerRoundFailed(true);
    }
    assert.equal(path.useStar, true);
    path.committed('star');
  }
  // Attempts at 0, then after skipping 1, 2, 4, 8, 16, 32, 32, … syncs.
  assert.deepEqual(attempts.slice(0, 7), [0, 2, 5, 10, 19, 36, 69]);
  const gaps = attempts.slice(1).map((a, i) => a - attempts[i] - 1);
  assert.ok(gaps.every((g) => g <= MAX_SKIPPED_SYNCS), `gaps ${gaps}`);
  assert.ok(attempts.length < 12, `${attempts.length} failed peer attempts in 200 syncs`);
});

test('a peer sync that commits starts over: the next failure skips one sync again', () => {
  const path = new PathFallback();
  path.peerRoundFailed(true);
  path.committed('star');
  path.committed('star'); // skipped
  path.peerRoundFailed(true);
  path.committed('star'); // now skipping 2
  assert.equal(path.skippedAhead, 2);
  path.committed('star');
  path.committed('star');
  assert.equal(path.useStar, false, 'peers are tried again');
  path.committed('ring');
  path.peerRoundFailed(true);
  path.committed('star');
  assert.equal(path.skippedAhead, 1, 'back to skipping one sync');
});

test('one failed peer round that is not an unreachable claim retries the peers; two send the sync to the star', () => {
  const path = new PathFallback();
  path.peerRoundFailed();
  assert.equal(path.useStar, false);
  path.peerRoundFailed();
  assert.equal(path.useStar, true);
  path.committed('star');
  assert.equal(path.skippedAhead, 1);
});

test('a star sync that no peer failure caused does not start skipping', () => {
  const path = new PathFallback();
  path.committed('star');
  assert.equal(path.useStar, false);
  assert.equal(path.skippedAhead, 0);
});
