// Robust Moshpit groups in the in-process runner: a fresh random split every sync, each group's real
// robust average (Group, centered clip) with attackers who see only their own group, and the count
// of group-syncs the attackers held a majority in.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import { gaussianBlobs } from '@tabfleet/data';
import { CpuBackend } from '@tabfleet/tensor';
import { groupAttacker } from './attacks';
import { holdOutTail } from './convergence';
import { attackerMajorities, randomGroups } from './robust-groups';
import { runSyncs, startWorkers, type RunOptions, type Tamper } from './simulate';
import { mlpWorkers, type JobSetup } from './workers';

const blobs = holdOutTail(gaussianBlobs(1000, 784, 10, 9), 200);
const job: JobSetup = {
  workers: 8, data: { train: blobs.head, test: blobs.tail }, batchSize: 8, seed: 3, optimizer: { kind: 'sgd', lr: 0.05, momentum: 0.9, nesterov: true },
  strategy: { strategy: 'localsgd', H: 2, compression: 'none', outerLr: 1, outerMomentum: 0 },
};

async function run(opts: Omit<RunOptions, 'syncs'>, syncs: number, setup: Partial<JobSetup> = {}) {
  const workers = mlpWorkers(new CpuBackend(), { ...job, ...setup });
  await startWorkers(workers);
  const reports = await runSyncs(workers, new MemoryNetwork(), { syncs, ...opts });
  return { workers, reports };
}

test('random groups: every member once, sizes at most the limit and within one of each other, a fresh split every sync', () => {
  const ids = Array.from({ length: 70 }, (_, i) => `m${i}`);
  const splits = [1, 2, 3].map((seq) => randomGroups(ids, seq, 16, 5));
  for (const groups of splits) {
    assert.deepEqual(groups.flat().sort(), [...ids].sort());
    const sizes = groups.map((g) => g.length);
    assert.equal(groups.length, 5);
    assert.ok(Math.max(...sizes) <= 16 && Math.max(...sizes) - Math.min(...sizes) <= 1, sizes.join(' '));
  }
  assert.notDeepEqual(splits[0], splits[1]);
  assert.deepEqual(randomGroups(ids, 2, 16, 5), splits[1], 'seeded: a run replays');
  assert.notDeepEqual(randomGroups(ids, 2, 16, 6), splits[1]);
  assert.throws(() => randomGroups(ids, 1, 0), /group size/);
});

test('attacker majorities count groups with strictly more attackers than half', () => {
  const bad = new Set(['a', 'b', 'c']);
  assert.equal(attackerMajorities([['a', 'b', 'x', 'y'], ['c', 'z'], ['a', 'b', 'c', 'x']], bad), 1);
});

test('one robust group as large as the job gives the ungrouped group average\'s parameters', async () => {
  const plain = await run({ group: { rule: 'centered-clip' } }, 2);
  const grouped = await run({ group: { rule: 'centered-clip' }, groups: { size: 8 } }, 2);
  const [a, b] = [await grouped.workers[3].engine.readParams(), await plain.workers[3].engine.readParams()];
  const worst = a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
  assert.ok(worst < 1e-5, `differs by up to ${worst}`);
});

test('robust groups of 4: attackers see only their group, ×100 is refused in every group, majorities are counted', async () => {
  // w7 sends ×100; w5 to w7 are counted as one attacker's identities (a majority is 3 of a group of 4).
  const identities = ['w5', 'w6', 'w7'];
  const seen: string[][][] = [];
  const scaled = groupAttacker('scaled', ['w7'], 1);
  const spy: Tamper = (payloads, seq, ids) => {
    (seen[seq - 1] ??= []).push([...ids!]);
    return scaled(payloads, seq, ids);
  };
  const { reports, workers } = await run({ group: { rule: 'centered-clip' }, groups: { size: 4, seed: 9 }, tamper: spy, attackers: identities, consensus: true }, 6);
  for (const [k, r] of reports.entries()) {
    assert.deepEqual(r.groups!.map((g) => g.length), [4, 4]);
    assert.deepEqual(seen[k].map((g) => g.join()).sort(), r.groups!.map((g) => g.join()).sort(), 'one tamper call per group, with its members');
    assert.deepEqual(r.refused, ['w7'], `sync ${r.seq}: exactly the attacker refused`);
    assert.equal(r.attackerMajorityGroups, attackerMajorities(r.groups!, new Set(identities)));
    assert.ok(r.consensus! < 0.2, `members stay close: ${r.consensus}`);
  }
  assert.ok(reports.some((r) => r.attackerMajorityGroups! > 0) && reports.some((r) => r.attackerMajorityGroups === 0), 'both kinds of sync occur');
  assert.notDeepEqual(reports[0].groups, reports[1].groups, 'split anew every sync');
  const acc = await workers[0].engine.evaluate(Infinity, 100, blobs.tail);
  assert.ok(acc.accuracy > 0.5, `the honest members learned: ${acc.accuracy}`);
});

test('two ×100 senders in one group of 4 are half of it: the norm screen passes them (its median is theirs)', async () => {
  const attackers = ['w6', 'w7'];
  const { reports } = await run({ group: { rule: 'centered-clip' }, groups: { size: 4, seed: 9 }, tamper: groupAttacker('scaled', attackers, 1), attackers }, 1);
  const together = reports[0].groups!.some((g) => attackers.every((id) => g.includes(id)));
  assert.ok(together, 'seed 9 puts them together in sync 1');
  assert.deepEqual(reports[0].refused, []);
});

test('robust grouped runs refuse pacing, departures, and tampering without a robust rule', async () => {
  await assert.rejects(run({ groups: { size: 4 }, tamper: (p) => [...p] }, 1), /robust group rule/);
  await assert.rejects(run({ groups: { size: 4 }, group: { rule: 'median' }, departures: { 1: ['w1'] } }, 1), /not robust ones/);
  await assert.rejects(run({ groups: { size: 4 }, group: { rule: 'median' }, pace: { budgetMs: 10 } }, 1), /paced|weigh/);
});
