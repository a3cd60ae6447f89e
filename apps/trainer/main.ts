// "Train in this tab": the page side. The engine (WebGPU device, model, data) lives in a Web Worker;
// this thread only renders progress. e2e/train-in-tab.test.ts drives it through window.tabfleetTrainer.
import { Comlink, startEngineWorker } from '@tabfleet/worker/client';
import type { BackendChoice, BackendInfo, Progress, SoloTrainConfig, TrainReport } from '@tabfleet/worker';
import { PRESETS, type PresetName } from '@tabfleet/nn';
import { $, kvRows } from '../shared/dom';
const { engine } = startEngineWorker();
let info: BackendInfo | null = null;

async function initBackend(): Promise<BackendInfo> {
  const wanted: BackendChoice = new URLSearchParams(location.search).get('backend') === 'cpu' ? 'cpu' : 'webgpu';
  try {
    info = await engine.init(wanted);
  } catch (e) {
    $('adapter').className = 'warn';
    $('adapter').textContent = `${(e as Error).message}. Add ?backend=cpu to train on the CPU reference instead (much slower).`;
    throw e;
  }
  $('adapter').textContent = info.kind === 'cpu' ? `CPU fallback: ${info.description} — slow, no GPU in use` : `GPU: ${info.description}`;
  return info;
}
const ready = initBackend();

export function defaultConfig(preset: PresetName, epochs: number): SoloTrainConfig {
  const dataset = preset === 'transformer-char'
    ? { kind: 'text' as const, sentences: 4000, seed: 1 }
    : { kind: 'fashion-mnist' as const, baseUrl: new URL('/datasets/fashion-mnist', location.href).href };
  const optimizer = preset === 'mlp-fashion'
    ? { kind: 'sgd' as const, lr: 0.05, momentum: 0.9, nesterov: true }
    : { kind: 'adamw' as const, lr: preset === 'cnn-fashion' ? 2e-3 : 3e-3 };
  return { preset, dataset, optimizer, batchSize: preset === 'transformer-char' ? 16 : 128, epochs, seed: 1 };
}

function render(p: Progress): void {
  $('bar-fill').style.width = `${(100 * p.step) / p.totalSteps}%`;
  $('status').textContent = `epoch ${p.epoch + 1}, step ${p.step}/${p.totalSteps}`;
  const rows: [string, string][] = [
    ['loss', p.loss.toFixed(4)],
    ['samples/s', p.samplesPerSec.toFixed(0)],
    ['elapsed', `${(p.elapsedMs / 1000).toFixed(1)} s`],
  ];
  if (p.testAccuracy !== undefined) rows.push(['test accuracy', `${(100 * p.testAccuracy).toFixed(2)}%`]);
  $('stats').querySelector('tbody')!.innerHTML = kvRows(rows);
}

async function run(cfg: SoloTrainConfig): Promise<TrainReport> {
  await ready;
  $<HTMLButtonElement>('start').disabled = true;
  try {
    const report = await engine.trainSolo(cfg, Comlink.proxy((p: Progress) => {
      render(p);
      console.log(`[progress] ${JSON.stringify(p)}`);
    }));
    $('status').textContent = `Done: ${report.steps} steps, test accuracy ${(100 * report.testAccuracy).toFixed(2)}% (${report.msPerStep.toFixed(1)} ms/step).`;
    return report;
  } catch (e) {
    $('status').className = 'warn';
    $('status').textContent = `Training failed: ${(e as Error).message}`;
    throw e;
  } finally {
    $<HTMLButtonElement>('start').disabled = false;
  }
}

$('form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target as HTMLFormElement);
  const preset = String(f.get('preset')) as PresetName;
  if (!(preset in PRESETS)) return;
  void run(defaultConfig(preset, Math.max(1, Number(f.get('epochs')) || 1)));
});

declare global {
  interface Window {
    tabfleetTrainer: { ready: Promise<BackendInfo>; run: typeof run; defaultConfig: typeof defaultConfig };
  }
}
window.tabfleetTrainer = { ready, run, defaultConfig };
