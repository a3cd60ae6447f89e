// WebGPU in Node through Dawn (npm `webgpu`) on SwiftShader, for tests and benchmarks. Node only.
import type { WebGpuBackendOptions } from './webgpu/backend';
import { WebGpuBackend } from './webgpu/backend';

process.env.VK_ICD_FILENAMES ??= '/usr/lib/chromium/vk_swiftshader_icd.json';
process.env.XDG_RUNTIME_DIR ??= '/tmp'; // silences the Vulkan loader's warning on headless machines

let gpuPromise: Promise<GPU> | null = null;
const devices = new Set<GPUDevice>();

/**
 * Every device this process made is destroyed as it exits. A process that exited with devices alive
 * (node --test-force-exit does, after the last test) now and then died with SIGSEGV: a core dump showed
 * the main thread in exit()'s handlers while a SwiftShader worker thread still ran and faulted. Destroying
 * the last Vulkan device stops SwiftShader's threads before exit() tears down what they use.
 */
function destroyDevicesAtExit(): void {
  for (const device of devices) device.destroy();
  devices.clear();
}

async function nodeGpu(): Promise<GPU> {
  gpuPromise ??= (async () => {
    const { create, globals } = await import('webgpu');
    Object.assign(globalThis, globals);
    process.once('exit', destroyDevicesAtExit);
    return create([]) as GPU;
  })();
  return gpuPromise;
}

export async function createNodeGpuBackend(opts: WebGpuBackendOptions = {}): Promise<WebGpuBackend> {
  const backend = await WebGpuBackend.create(await nodeGpu(), opts);
  devices.add(backend.rt.device);
  return backend;
}
