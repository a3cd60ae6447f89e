// The coordinator benchmark's settings: the volunteer steps, job size, windows, time budget, how the
// simulated volunteers behave, and the job every step creates.
import type { JobSpecInput } from '@tabfleet/protocol';
import type { ClientBehaviour } from './messages';

export interface CoordinatorBenchConfig {
  /** Volunteer counts to ramp through, ascending. */
  steps: number[];
  /** Members per job (the last job of a step may be smaller). */
  jobSize: number;
  /** Most connections one client process holds. */
  perProcess: number;
  /** Measurement windows per step (the `--runs`), and their length. */
  windows: number;
  windowMs: number;
  /** Rounds run this long after a step's volunteers are admitted before measuring. */
  settleMs: number;
  /** Stop ramping (and report) once this much time has passed. */
  budgetMs: number;
  behaviour: ClientBehaviour;
  goal: { volunteers: number; p99Ms: number; kbPerVolunteer: number };
}

export function coordinatorConfig(runs: number, quick: boolean): CoordinatorBenchConfig {
  const goal = { volunteers: 5000, p99Ms: 250, kbPerVolunteer: 20 };
  const fromEnv = process.env.TABFLEET_BENCH_COORDINATOR_STEPS?.split(',').map(Number).filter((n) => Number.isInteger(n) && n > 0);
  const ackRoundEvents = process.env.TABFLEET_BENCH_COORDINATOR_ROUND_ACKS !== '0';
  if (quick) {
    return {
      steps: fromEnv?.length ? fromEnv : [40, 80], jobSize: 20, perProcess: 40, windows: runs, windowMs: 1500, settleMs: 500, budgetMs: 45_000, goal,
      behaviour: { trainMs: [200, 400], allreduceMs: [5, 20], heartbeatMs: 1000, ackRoundEvents, connectConcurrency: 20, joinTimeoutMs: 10_000, rampTimeoutMs: 15_000 },
    };
  }
  return {
    steps: fromEnv?.length ? fromEnv : [500, 1000, 2000, 5000, 6400], jobSize: 100, perProcess: 1000, windows: runs, windowMs: 6000, settleMs: 4000, budgetMs: 8 * 60_000, goal,
    behaviour: { trainMs: [1000, 3000], allreduceMs: [20, 100], heartbeatMs: 5000, ackRoundEvents, connectConcurrency: 100, joinTimeoutMs: 30_000, rampTimeoutMs: 120_000 },
  };
}

export function benchJobSpec(size: number, index: number): JobSpecInput {
  return {
    // Fixed H: the round clock under load is measured, with its figures comparable across runs.
    name: `coordinator bench ${index}`, preset: 'mlp-fashion', dataset: 'synthetic-blobs', strategy: 'localsgd', H: 1, pacing: 'fixed',
    // Jobs of 100 members are rings: an untrusted job is one group of at most 16.
    hyperparameters: { lr: 0.1, batchSize: 32 }, minWorkers: size, maxWorkers: size, trust: 'trusted',
    // checkpointEvery is left to the job default: the uploads and the round they hold are measured.
    targetSteps: 10_000_000,
  };
}
