export * from './solo';
export type { EngineApi, BackendChoice, BackendInfo } from './engine-worker';
export * from './sampler';
