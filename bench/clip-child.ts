// A child process of the clip benchmark (bench/child-pool.ts forks it): loads Fashion-MNIST once, then
// trains the runs it is sent one at a time and sends back each one's validation accuracy. The
// candidate rule combines the contributions in the `tamper` hook, which then hands every member that
// one vector: the ring's mean of identical vectors is the vector, so the run measures the rule's math
// alone (no screening, no group protocol: the byzantine benchmark measures those).
import { MemoryNetwork } from '@tabfleet/collective';
import { holdOutTail, mlpWorkers, payloadAttacker, runSyncs, startWorkers, type Payload, type PayloadAttack } from '@tabfleet/distributed';
import { fashionMnistFromDisk } from '@tabfleet/distributed/node';
import { centeredClip, mean } from '@tabfleet/protocol';
import { CpuBackend } from '@tabfleet/tensor';
import { serveTasks } from './child-pool';
import type { ClipRun, ClipRunResult } from './clip';

const data = await fashionMnistFromDisk();
const backend = new CpuBackend();

async function train(run: ClipRun): Promise<ClipRunResult> {
  const t0 = performance.now();
  const { head: train, tail: validation } = holdOutTail(data.train, run.job.validationExamples);
  const attackerRanks = Array.from({ length: run.attackers }, (_, k) => run.workers - run.attackers + k);
  const workers = mlpWorkers(backend, {
    workers: run.workers, data: { train, test: data.test }, batchSize: run.job.batchSize, seed: run.seed, optimizer: run.job.optimizer,
    strategy: { strategy: 'localsgd', H: run.job.H, compression: 'none', outerLr: 1, outerMomentum: 0 },
    flippedLabelRanks: run.attack === 'label-flip' ? attackerRanks : [],
  });
  await startWorkers(workers);
  const attack = run.attack && run.attack !== 'label-flip' ? payloadAttacker(run.attack as PayloadAttack, run.attackers, run.seed) : null;
  const combine = (xs: Float32Array[]) => (run.radiusFactor === null ? mean(xs) : centeredClip(xs, { radiusFactor: run.radiusFactor, iterations: run.iterations }));
  await runSyncs(workers, new MemoryNetwork({ seed: run.seed }), {
    syncs: run.syncs,
    tamper: async (own, seq) => {
      const sent = attack ? await attack(own, seq) : own;
      const combined = combine(sent.map((p) => (p as Extract<Payload, { kind: 'dense' }>).values));
      return sent.map((p) => ({ ...p, values: combined }) as Payload);
    },
  });
  const val = await workers[0].engine.evaluate(Infinity, 500, validation);
  return { validationAccuracy: val.accuracy, validationCount: val.count, wallMs: performance.now() - t0 };
}

serveTasks<ClipRun, ClipRunResult>(train);
