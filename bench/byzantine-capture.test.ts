// group_capture_rate, small (bench/byzantine-capture.ts): Sybils that rejoin under fresh identities and
// addresses after every sync whose group they did not hold, through the real server. They do rejoin,
// and what they capture stays within what random assignment of the same syncs' members gives.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { binomialAbove, hypergeometricAbove, measureGroupCapture } from './byzantine-capture';

test('the capture rates of random assignment: the binomial of docs/protocol.md\'s table, the hypergeometric beside it', () => {
  // docs/protocol.md: g = 16, p = 0.2: 1.5e-3 (more than half); g = 4, p = 0.1: 3.7e-3.
  assert.ok(Math.abs(binomialAbove(16, 0.2, 9) - 1.5e-3) < 0.05e-3, `${binomialAbove(16, 0.2, 9)}`);
  assert.ok(Math.abs(binomialAbove(4, 0.1, 3) - 3.7e-3) < 0.05e-3, `${binomialAbove(4, 0.1, 3)}`);
  // Drawing without replacement from 64 with 13 attackers is less likely to gather 9 than the binomial.
  const hyper = hypergeometricAbove(64, 13, 16, 9);
  assert.ok(hyper > 0 && hyper < binomialAbove(16, 13 / 64, 9), `${hyper}`);
  // Every outcome together: 1.
  assert.ok(Math.abs(hypergeometricAbove(20, 5, 6, 0) - 1) < 1e-12);
});

test('16 volunteers, 4 of them Sybils that rejoin to land together in groups of 4: no more captured groups than random assignment gives', async () => {
  const r = await measureGroupCapture({ members: 16, attackerShare: 0.25, groupSize: 4, syncs: 30 });
  console.log(JSON.stringify(r));
  assert.equal(r.syncs, 30);
  assert.ok(r.groupSyncs >= 30 * 3, `${r.groupSyncs} groups drawn`);
  assert.ok(r.rejoins >= 10, `${r.rejoins} rejoins`);
  assert.ok(r.meanAttackersPresent > 0.5, `${r.meanAttackersPresent} attackers present per sync`);
  // Twice the 95% half width: a chance failure about once in 20,000 runs.
  assert.ok(r.rate <= r.randomRate + 2 * r.ci95, `captured ${r.rate} against ${r.randomRate} ± ${r.ci95}`);
  assert.ok(r.halfOrMore >= r.captured);
});
