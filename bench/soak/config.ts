// The soak's settings: churn rates, run length, the job, the round timings of its server process.
import type { JobSpecInput } from '@tabfleet/protocol';
import type { ServerOptions } from '@tabfleet/server';

export interface SoakConfig {
  churnRates: number[];
  /** Syncs in the job's history (after the restart's re-done ones) before a churn run ends. */
  rounds: number;
  /** Syncs a server process commits before its RSS is first read. */
  warmupRounds: number;
  /** Volunteers at the start; churn keeps the count within [minMembers, maxMembers]. */
  initialMembers: number;
  minMembers: number;
  maxMembers: number;
  /** Departures never leave fewer volunteers than this holding the latest sync's model. */
  minHolders: number;
  /** Each churn event happens at a uniform delay in [0, this) after the commit, so some land mid-round. */
  churnSpreadMs: number;
  /** Simulated training between a commit (or admission) and round:ready. */
  trainMs: number;
  timing: NonNullable<ServerOptions['timing']>;
  job: JobSpecInput;
  /** No commit for this long fails the run (a stalled round clock). */
  commitTimeoutMs: number;
  budgetPerRateMs: number;
}

export function soakConfig(quick: boolean): SoakConfig {
  return {
    churnRates: [0.05, 0.2, 0.5],
    rounds: quick ? 30 : 1000,
    warmupRounds: quick ? 5 : 50,
    initialMembers: 8,
    minMembers: 4,
    maxMembers: 12,
    minHolders: 2,
    churnSpreadMs: 20,
    trainMs: 2,
    // Short, so a member that vanished costs seconds, not minutes (pace-based bounds stay below them).
    timing: { roundTimeoutMs: 5_000, barrierTimeoutMs: 5_000, loadTimeoutMs: 5_000 },
    // The smallest model (52,298 parameters); targetSteps far away so the job never ends; a
    // checkpoint every 5 syncs (and whenever a joiner waits), so a restart resumes from a recent one.
    job: {
      // Fixed H: the round clock under churn, comparable with earlier soak runs.
      name: 'soak', preset: 'cnn-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 1, pacing: 'fixed', hyperparameters: { lr: 0.1, batchSize: 32 },
      minWorkers: 2, maxWorkers: 16, targetSteps: 10_000_000, checkpointEvery: 5, evalEverySteps: 10,
    },
    commitTimeoutMs: quick ? 20_000 : 60_000,
    budgetPerRateMs: quick ? 120_000 : 9 * 60_000,
  };
}
