// The coordinator benchmark's settings: the volunteer steps, job size, windows, time budget, how the
// simulated volunteers behave, and the job every step creates.
import type { JobSpecInput } from '@tabfleet/protocol';
import type { ClientBehaviour } from './messages';

export interface CoordinatorBenchConfig {
  /** Volunteer counts to ramp through on one server node, ascending. */
  steps: number[];
  /** Volunteer counts to ramp through on `twoNodes.nodes` server nodes sharing a redis-server, ascending. */
  twoNodes: { nodes: number; steps: number[]; budgetMs: number };
  /** Members per job (the last job of a step may be smaller). */
  jobSize: number;
  /** Unfinished jobs the bench's servers allow (their maxActiveJobs option; the product default is LIMITS.maxActiveJobs = 64). */
  maxActiveJobs: number;
  /** Most connections one client process holds. */
  perProcess: number;
  /**
   * Niceness of the client processes (the server nodes and the redis-server run at 0). They stand for
   * volunteers on other machines; on this one they would otherwise take CPU from the server under
   * test whenever both are busy. 0: equal priority.
   */
  clientNice: number;
  /** Measurement windows per step (the `--runs`), and their length. */
  windows: number;
  windowMs: number;
  /** Rounds run this long after a step's volunteers are admitted before measuring. */
  settleMs: number;
  /** Stop ramping the single node (and go on to the two nodes) once this much time has passed since its server was up. */
  budgetMs: number;
  /**
   * Stop ramping a phase after the first step whose pooled whole-round p99 is this many times the
   * goal's: larger steps could not be under the goal, and the bench's time is better spent on the
   * next phase. The step is still reported.
   */
  stopOverGoalFactor: number;
  behaviour: ClientBehaviour;
  /** Issue 35: one node holds `volunteers` at a whole-round p99 under p99Ms and at most kbPerVolunteer of RSS each; two nodes `twoNodeVolunteers`. */
  goal: { volunteers: number; twoNodeVolunteers: number; p99Ms: number; kbPerVolunteer: number };
  /** Connections of the library floor (floor.ts: bare Socket.IO with the same rounds, plain ws), measured after the real phases; 0: none. */
  floorConnections: number;
}

/** What server-process.ts passes as maxActiveJobs: 20,000 volunteers in jobs of 100 need 200. */
export const BENCH_MAX_ACTIVE_JOBS = 256;

/** The client processes' niceness unless TABFLEET_BENCH_COORDINATOR_CLIENT_NICE=0..19 says otherwise. */
export const CLIENT_NICE = 10;

export const GOAL = { volunteers: 10_000, twoNodeVolunteers: 20_000, p99Ms: 250, kbPerVolunteer: 16 };

/** TABFLEET_BENCH_COORDINATOR_STEPS / _TWO_NODE_STEPS=a,b,c: other steps, for investigating. */
function stepsFromEnv(name: string): number[] | undefined {
  const steps = process.env[name]?.split(',').map(Number).filter((n) => Number.isInteger(n) && n >= 0);
  return steps?.length ? steps.filter((n) => n > 0) : undefined;
}

export function coordinatorConfig(runs: number, quick: boolean): CoordinatorBenchConfig {
  const goal = GOAL;
  const steps = stepsFromEnv('TABFLEET_BENCH_COORDINATOR_STEPS');
  const twoNodeSteps = stepsFromEnv('TABFLEET_BENCH_COORDINATOR_TWO_NODE_STEPS');
  const ackRoundEvents = process.env.TABFLEET_BENCH_COORDINATOR_ROUND_ACKS === '1';
  // The runtime's endpoint unless TABFLEET_BENCH_COORDINATOR_ENDPOINT=socket.io (for comparing the two).
  const endpoint = process.env.TABFLEET_BENCH_COORDINATOR_ENDPOINT === 'socket.io' ? 'socket.io' : 'lean';
  // Light clients unless TABFLEET_BENCH_COORDINATOR_CLIENT=socket.io-client: the same frames, less of the
  // 2-core machine's CPU taken from the server under test.
  const client = process.env.TABFLEET_BENCH_COORDINATOR_CLIENT === 'socket.io-client' ? 'socket.io-client' : 'light';
  const floorEnv = process.env.TABFLEET_BENCH_COORDINATOR_FLOOR;
  const niceEnv = process.env.TABFLEET_BENCH_COORDINATOR_CLIENT_NICE;
  const clientNice = niceEnv !== undefined && /^\d+$/.test(niceEnv) && Number(niceEnv) <= 19 ? Number(niceEnv) : CLIENT_NICE;
  const floor = (fallback: number) => (floorEnv !== undefined && Number.isInteger(Number(floorEnv)) && Number(floorEnv) >= 0 ? Number(floorEnv) : fallback);
  if (quick) {
    return {
      steps: steps ?? [40, 80], twoNodes: { nodes: 2, steps: twoNodeSteps ?? [40], budgetMs: 30_000 },
      jobSize: 20, maxActiveJobs: BENCH_MAX_ACTIVE_JOBS, perProcess: 40, clientNice, windows: runs, windowMs: 1500, settleMs: 500, budgetMs: 45_000, stopOverGoalFactor: Infinity, goal,
      floorConnections: floor(40),
      behaviour: { trainMs: [200, 400], allreduceMs: [5, 20], heartbeatAck: false, ackRoundEvents, endpoint, client, connectConcurrency: 20, joinTimeoutMs: 10_000, rampTimeoutMs: 15_000 },
    };
  }
  return {
    steps: steps ?? [500, 1000, 2000, 3000, 4000, 5000, 7500, 10_000],
    twoNodes: { nodes: 2, steps: twoNodeSteps ?? [2000, 4000, 6000, 8000, 10_000, 15_000, 20_000], budgetMs: 6 * 60_000 },
    jobSize: 100, maxActiveJobs: BENCH_MAX_ACTIVE_JOBS, perProcess: 1000, clientNice, windows: runs, windowMs: 6000, settleMs: 4000, budgetMs: 9 * 60_000, stopOverGoalFactor: 4, goal,
    // The floor at the goal's count: does the library alone hold 10,000 within the goal's memory on this machine?
    floorConnections: floor(goal.volunteers),
    // A tab's heartbeat: at the period the server names (protocol's heartbeat.ts), without an ack since the
    // runtime stopped asking for one it never used (its acks were a third of the server's writes at 7,500).
    behaviour: {
      trainMs: [1000, 3000], allreduceMs: [20, 100], heartbeatAck: false, ackRoundEvents, endpoint, client, connectConcurrency: 100, joinTimeoutMs: 30_000, rampTimeoutMs: 120_000,
    },
  };
}

export function benchJobSpec(size: number, index: number): JobSpecInput {
  return {
    // Fixed H: the round clock under load is measured, with its figures comparable across runs.
    name: `coordinator bench ${index}`, preset: 'mlp-fashion', dataset: 'synthetic-blobs', strategy: 'localsgd', H: 1, pacing: 'fixed',
    // Jobs of 100 members are trusted rings (an untrusted one would need groupSize, groups of at most 16).
    hyperparameters: { lr: 0.1, batchSize: 32 }, minWorkers: size, maxWorkers: size, trust: 'trusted',
    // checkpointEvery is left to the job default: the uploads and the round they hold are measured.
    targetSteps: 10_000_000,
  };
}
