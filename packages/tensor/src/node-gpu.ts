// WebGPU in Node through Dawn (npm `webgpu`) on SwiftShader, for tests and benchmarks. Node only.
import type { WebGpuBackendOptions } from './webgpu/backend';
import { WebGpuBackend } from './webgpu/backend';

process.env.VK_ICD_FILENAMES ??= '/usr/lib/chromium/vk_swiftshader_icd.json';
process.env.XDG_RUNTIME_DIR ??= '/tmp'; // silences the Vulkan loader's warning on headless machines

let gpuPromise: Promise<GPU> | null = null;

async function nodeGpu(): Promise<GPU> {
  gpuPromise ??= (async () => {
    const { create, globals } = await import('webgpu');
    Object.assign(globalThis, globals);
    return create([]) as GPU;
  })();
  return gpuPromise;
}

export async function createNodeGpuBackend(opts: WebGpuBackendOptions = {}): Promise<WebGpuBackend> {
  return WebGpuBackend.create(await nodeGpu(), opts);
}
