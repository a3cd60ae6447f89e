// Main-thread side: starts the engine Web Worker and wraps it with comlink.
import * as Comlink from 'comlink';
import type { EngineApi } from './engine-worker';

export type Engine = Comlink.Remote<EngineApi>;

export function startEngineWorker(): { engine: Engine; terminate: () => void } {
  const worker = new Worker(new URL('./engine-worker.ts', import.meta.url), { type: 'module', name: 'tabfleet-engine' });
  return { engine: Comlink.wrap<EngineApi>(worker), terminate: () => worker.terminate() };
}

export { Comlink };
