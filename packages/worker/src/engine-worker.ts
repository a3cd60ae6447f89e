// The dedicated Web Worker that owns the WebGPU device and trains; the page talks to it via comlink.
import * as Comlink from 'comlink';
import { CpuBackend, WebGpuBackend, type Backend } from '@tabfleet/tensor';
import { trainSolo, type Progress, type SoloTrainConfig, type TrainReport } from './solo';

export type BackendChoice = 'webgpu' | 'cpu';

export interface BackendInfo {
  kind: BackendChoice;
  description: string;
  adapter: { vendor: string; architecture: string; description: string; isCpu: boolean } | null;
}

export class EngineApi {
  private backend: Backend | null = null;

  /** Opens the backend. 'cpu' is the explicit, labelled fallback for machines without WebGPU. */
  async init(choice: BackendChoice): Promise<BackendInfo> {
    if (choice === 'cpu') {
      this.backend = new CpuBackend('f32');
      return { kind: 'cpu', description: this.backend.description, adapter: null };
    }
    const gpu = await WebGpuBackend.create((self.navigator as Navigator).gpu);
    this.backend = gpu;
    const a = gpu.adapter;
    return { kind: 'webgpu', description: gpu.description, adapter: { vendor: a.vendor, architecture: a.architecture, description: a.description, isCpu: a.isCpu } };
  }

  async trainSolo(cfg: SoloTrainConfig, onProgress: (p: Progress) => void): Promise<TrainReport> {
    if (!this.backend) throw new Error('engine not initialized: call init() first');
    return trainSolo(this.backend, cfg, onProgress);
  }
}

Comlink.expose(new EngineApi());
