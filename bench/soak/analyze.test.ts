// The soak's checks on made-up tables: a clean history with a restart passes (its re-done syncs counted
// apart), and each planted fault (a sync committed twice, a skipped sync, a resume past the last
// commit, members disagreeing, a bad checkpoint load, a missing or extra metric row) is counted where
// it belongs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { analyzeSoak, type CommitSeen, type LoadSeen, type MetricRow, type Restart, type RoundRow } from './analyze';

const KILL_AT = 1_000;
const sum = (epoch: number, seq: number) => `c${epoch}-${seq}`;

/**
 * Epoch 0 commits 1..6 (round 3 of sync 3 aborted first; sync 2 went through the server, a star round),
 * is killed, epoch 1 resumes from `resumed` (5) and commits resumed+1..9.
 */
function cleanRun(resumed = 5) {
  const rounds: RoundRow[] = [];
  let roundId = 0;
  const add = (epoch: number, seq: number, outcome = 'committed') => rounds.push({
    roundId: ++roundId, seq, outcome, startedAt: epoch === 0 ? 10 * roundId : KILL_AT + 10 * roundId, mode: epoch === 0 && seq === 2 ? 'star' : 'group',
    detail: outcome === 'committed' ? sum(epoch, seq) : 'member lost',
  });
  for (let s = 1; s <= 6; s++) {
    if (s === 3) add(0, 3, 'aborted');
    add(0, s);
  }
  for (let s = resumed + 1; s <= 9; s++) add(1, s);
  const restarts: Restart[] = [{ killedAt: KILL_AT, resumedSeq: resumed }];
  const commits: CommitSeen[] = rounds.filter((r) => r.outcome === 'committed').flatMap((r) => {
    const epoch = r.startedAt >= KILL_AT ? 1 : 0;
    return [0, 1].map(() => ({ epoch, roundId: r.roundId, seq: r.seq, checksum: r.detail }));
  });
  // A joiner in epoch 0 loads sync 4; after the restart everyone loads the checkpoint of sync 5 (epoch 0's).
  const loads: LoadSeen[] = [
    { epoch: 0, seq: 0, checksum: 'seed' }, { epoch: 0, seq: 4, checksum: sum(0, 4) }, { epoch: 1, seq: resumed, checksum: sum(0, resumed) }, { epoch: 1, seq: 7, checksum: sum(1, 7) },
  ];
  const metrics: MetricRow[] = [];
  for (let s = 1; s <= 9; s++) metrics.push({ seq: s, bytesSent: 100 });
  metrics.push({ seq: 5, bytesSent: null });
  return { rounds, restarts, commits, loads, metrics };
}

test('a clean history with a restart: nothing lost or duplicated, the re-done sync counted apart', () => {
  const a = analyzeSoak(cleanRun());
  assert.equal(a.finalSeq, 9);
  assert.equal(a.committedRounds, 10);
  assert.equal(a.abortedRounds, 1);
  assert.equal(a.rolledBack, 1, 'sync 6 was committed before the kill, past the checkpoint of sync 5');
  assert.equal(a.redone, 1, 'and committed again after it');
  assert.deepEqual(a.historyByMode, { group: 8, star: 1 });
  assert.deepEqual([a.lost, a.duplicated, a.checksumDisagreements, a.commitsUnknownToServer, a.loadMismatches], [0, 0, 0, 0, 0]);
  assert.equal(a.loadsChecked, 3, 'the seed load is not compared');
  assert.deepEqual(a.metrics, { syncRows: 9, syncMissing: 0, syncExtra: 0, evalRows: 1, evalExtra: 0 });
  assert.deepEqual(a.epochs.map((e) => [e.firstSeq, e.lastSeq]), [[1, 6], [6, 9]]);
});

test('a restart from an older checkpoint: each re-done sync counted once, apart from a duplicate', () => {
  const run = cleanRun(3);
  const five = run.rounds.find((r) => r.startedAt >= KILL_AT && r.seq === 5)!;
  // Sync 5 committed twice after the restart: re-done once, and a duplicate.
  const maxId = Math.max(...run.rounds.map((r) => r.roundId));
  run.rounds.push({ ...five, roundId: maxId + 1, startedAt: KILL_AT + 10 * (maxId + 1), seq: 10, detail: sum(1, 10) });
  run.rounds.splice(run.rounds.indexOf(five) + 1, 0, { ...five, roundId: five.roundId });
  run.rounds.forEach((r, i) => (r.roundId = i + 1));
  const a = analyzeSoak(run);
  assert.equal(a.rolledBack, 3, 'syncs 4, 5 and 6 were past the checkpoint of sync 3');
  assert.equal(a.redone, 3);
  assert.equal(a.duplicated, 1);
  assert.equal(a.lost, 0);
  assert.equal(a.finalSeq, 10);
});

test('a sync committed twice within one epoch is a duplicate; a skipped one is lost', () => {
  const run = cleanRun();
  const last = run.rounds[run.rounds.length - 1];
  run.rounds.push({ ...last, roundId: last.roundId + 1, startedAt: last.startedAt + 10, seq: 9 });
  run.rounds.push({ ...last, roundId: last.roundId + 2, startedAt: last.startedAt + 20, seq: 12, detail: sum(1, 12) });
  const a = analyzeSoak(run);
  assert.equal(a.duplicated, 1);
  assert.equal(a.lost, 2, 'syncs 10 and 11');
  assert.equal(a.finalSeq, 12);
});

test('resuming past the last committed sync loses the syncs between', () => {
  const run = cleanRun();
  run.restarts[0].resumedSeq = 7;
  run.rounds = run.rounds.filter((r) => !(r.startedAt >= KILL_AT && r.seq <= 7));
  const a = analyzeSoak(run);
  assert.equal(a.lost, 1, 'sync 7 was never committed');
  assert.equal(a.rolledBack, 0);
  assert.equal(a.redone, 0);
});

test('members that applied different parameters, a server-side mismatch, and a commit the server never stored are counted', () => {
  const run = cleanRun();
  run.commits[0] = { ...run.commits[0], checksum: 'other' };
  const mismatch = run.rounds.find((r) => r.seq === 8)!;
  mismatch.detail = 'checksum mismatch: a,b';
  run.commits.push({ epoch: 1, roundId: 999, seq: 10, checksum: 'x' });
  const a = analyzeSoak(run);
  assert.equal(a.checksumDisagreements, 2);
  assert.equal(a.commitsUnknownToServer, 1);
});

test('a checkpoint load is compared with the history its epoch knows', () => {
  const run = cleanRun();
  // After the restart sync 6 is epoch 1's: epoch 0's sync-6 model is no longer the history.
  run.loads.push({ epoch: 1, seq: 6, checksum: sum(0, 6) });
  run.loads.push({ epoch: 0, seq: 2, checksum: 'corrupt' });
  const a = analyzeSoak(run);
  assert.equal(a.loadMismatches, 2);
});

test('a missing sync row, a second row for a sync and a row past the history are counted', () => {
  const run = cleanRun();
  run.metrics = run.metrics.filter((m) => m.seq !== 3);
  run.metrics.push({ seq: 4, bytesSent: 7 }, { seq: 10, bytesSent: 7 }, { seq: 5, bytesSent: null });
  const a = analyzeSoak(run);
  assert.equal(a.metrics.syncMissing, 1);
  assert.equal(a.metrics.syncExtra, 2);
  assert.equal(a.metrics.evalExtra, 1);
});
