// One cell of the byzantine benchmark: WORKERS in-process LocalSGD workers of the Fashion-MNIST MLP
// on the CPU backend, the last `attackers` of them attacking, averaged by the ring's plain mean
// (rule 'mean') or by a group with a robust rule, then evaluated once at the end on the test set and
// on the validation split (the held-out training examples the worst attacks are chosen on).
import { MemoryNetwork } from '@tabfleet/collective';
import type { Dataset } from '@tabfleet/data';
import { groupAttacker, holdOutTail, mlpWorkers, payloadAttacker, runSyncs, startWorkers } from '@tabfleet/distributed';
import type { Backend } from '@tabfleet/tensor';
import { WORKERS, isCollapsed, type CellSpec, type JobSettings } from './byzantine-config';
import { median } from './stats';

export interface CellResult {
  spec: CellSpec;
  syncs: number;
  /** Optimizer steps per worker. */
  steps: number;
  testAccuracy: number;
  testLoss: number;
  testCount: number;
  validationAccuracy: number;
  validationCount: number;
  /** Mean training loss over the workers' local steps of the last sync (attackers' included). */
  trainLoss: number;
  /** Test loss not finite, or test accuracy below COLLAPSE_BELOW. */
  collapsed: boolean;
  /** Contributions refused by the group's owners (screening), summed over syncs: attackers' and honest members'. */
  refused: { attackers: number; honest: number };
  /** Medians over the syncs: bytes one worker sent (mean over workers), and the exchange's wall time. */
  bytesPerWorkerPerSync: number;
  exchangeMsPerSync: number;
  /** Grouped cells (members in groups): group-syncs, and those the attackers held a strict majority in. */
  groupSyncs?: number;
  attackerMajorityGroups?: number;
  /** Training, exchanges and the final evaluations. */
  wallMs: number;
  /** The child process's CPU time over the same (user + system): what the cell costs whatever else loads the machine. */
  cpuMs: number;
}

export async function runCell(backend: Backend, data: { train: Dataset; test: Dataset }, spec: CellSpec, job: JobSettings): Promise<CellResult> {
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const { head: train, tail: validation } = holdOutTail(data.train, job.validationExamples);
  const members = spec.members ?? WORKERS;
  const attackerRanks = Array.from({ length: spec.attackers }, (_, k) => members - spec.attackers + k);
  const attackerList = attackerRanks.map((r) => `w${r}`);
  const attackerIds = new Set(attackerList);
  const workers = mlpWorkers(backend, {
    workers: members, data: { train, test: data.test }, batchSize: job.batchSize, seed: spec.seed,
    optimizer: job.optimizer,
    strategy: { strategy: 'localsgd', H: job.H, compression: 'none', outerLr: 1, outerMomentum: 0 },
    flippedLabelRanks: spec.attack === 'label-flip' ? attackerRanks : [],
  });
  await startWorkers(workers);
  const payloadAttack = spec.attack && spec.attack !== 'label-flip' && spec.attackers > 0 ? spec.attack : null;
  const grouped = spec.groupSize !== undefined;
  if (grouped && spec.rule === 'mean') throw new Error('grouped cells average by a robust rule');
  const attacker = payloadAttack && (grouped ? groupAttacker(payloadAttack, attackerList, spec.seed) : payloadAttacker(payloadAttack, spec.attackers, spec.seed));
  const reports = await runSyncs(workers, new MemoryNetwork({ seed: spec.seed }), {
    syncs: spec.syncs,
    group: spec.rule === 'mean' ? undefined : { rule: spec.rule },
    tamper: attacker || undefined,
    ...(grouped ? { groups: { size: spec.groupSize!, seed: spec.seed }, attackers: attackerList } : {}),
  });
  // Worker 0 is honest; every member holds the same parameters after a sync (grouped: every member
  // of its last group), so it stands for the job's model (grouped: one member's, as a volunteer's checkpoint).
  const engine = workers[0].engine;
  const limit = spec.evalExamples ?? Infinity;
  const test = await engine.evaluate(limit, 500, data.test);
  const val = await engine.evaluate(limit, 500, validation);
  const refused = reports.flatMap((r) => r.refused);
  return {
    spec, syncs: reports.length, steps: engine.step,
    testAccuracy: test.accuracy, testLoss: test.loss, testCount: test.count, validationAccuracy: val.accuracy, validationCount: val.count,
    trainLoss: reports.at(-1)?.loss ?? Number.NaN,
    collapsed: isCollapsed({ testAccuracy: test.accuracy, testLoss: test.loss }),
    refused: { attackers: refused.filter((id) => attackerIds.has(id)).length, honest: refused.filter((id) => !attackerIds.has(id)).length },
    bytesPerWorkerPerSync: median(reports.map((r) => r.bytesSent.reduce((a, b) => a + b, 0) / r.bytesSent.length)),
    exchangeMsPerSync: median(reports.map((r) => r.exchangeMs)),
    ...(grouped ? {
      groupSyncs: reports.reduce((a, r) => a + r.groups!.length, 0),
      attackerMajorityGroups: reports.reduce((a, r) => a + (r.attackerMajorityGroups ?? 0), 0),
    } : {}),
    wallMs: performance.now() - t0,
    cpuMs: cpuMsSince(cpu0),
  };
}

function cpuMsSince(start: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}
