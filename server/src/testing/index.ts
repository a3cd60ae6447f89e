// What tests, benchmarks and launchers outside the server package use: a real server on a loopback
// port with a fresh data directory, simulated volunteers that follow the protocol, and the job
// coordinator with its store for simulations that drive its clock (`npm run simulate`).
export * from './sim-volunteer';
export * from './adaptive-owner';
export { JobCoordinator } from '../coordinator/job-coordinator';
export type { Clock, CoordinatorDeps } from '../coordinator/types';
export { SqliteStore } from '../store/sqlite';
export type { JobRecord } from '../store/store';
export * from './test-server';
export * from './redis-server';
export * from './coturn';
export { IceIssuer, turnCredentials } from '../ice';
export * from './turn-client';
export { EXCHANGE_BUDGET_FACTOR, FIRST_WORK_MS, MAX_STEPS_FACTOR, roundBudgetMs, unmeasuredWork } from '../coordinator/pacing';
export * from './promtool';
export * from './exposition';
export * from './test-ca';
