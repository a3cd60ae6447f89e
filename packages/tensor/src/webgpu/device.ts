// Acquiring a WebGPU device with the limits training needs, and turning device loss and
// uncaptured errors into clear errors.

export class GpuUnavailableError extends Error {
  override name = 'GpuUnavailableError';
}

export class GpuDeviceLostError extends Error {
  override name = 'GpuDeviceLostError';
}

export class GpuKernelError extends Error {
  override name = 'GpuKernelError';
}

/** A step needed more GPU memory than the tab allows itself (`memoryBudgetBytes`); nothing was recorded past it. */
export class GpuOutOfMemoryError extends Error {
  override name = 'GpuOutOfMemoryError';
}

export interface AdapterSummary {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  /** True for CPU implementations (SwiftShader); selects kernel variants tuned for them. */
  isCpu: boolean;
  features: string[];
  maxStorageBufferBindingSize: number;
  maxBufferSize: number;
}

/** WebGPU's default memory limits: what a device gets unless it asks the adapter for more. */
export const WEBGPU_DEFAULT_MEMORY_LIMITS = { maxStorageBufferBindingSize: 128 * 2 ** 20, maxBufferSize: 256 * 2 ** 20 };

/** `defaultMemoryLimits`: keep WebGPU's default buffer limits instead of the adapter's (benchmarks of small devices). */
export async function requestGpuDevice(gpu: GPU | undefined, opts: { defaultMemoryLimits?: boolean } = {}): Promise<{ device: GPUDevice; adapter: AdapterSummary }> {
  if (!gpu) throw new GpuUnavailableError('WebGPU is not available here (navigator.gpu is missing); enable WebGPU or use the CPU fallback');
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) throw new GpuUnavailableError('WebGPU is present but no GPU adapter was found');
  const lim = opts.defaultMemoryLimits ? { ...pick(adapter.limits), ...WEBGPU_DEFAULT_MEMORY_LIMITS } : adapter.limits;
  const requiredLimits: Record<string, number> = {
    maxStorageBufferBindingSize: lim.maxStorageBufferBindingSize,
    maxBufferSize: lim.maxBufferSize,
    maxStorageBuffersPerShaderStage: Math.min(lim.maxStorageBuffersPerShaderStage, 10),
    maxComputeWorkgroupStorageSize: lim.maxComputeWorkgroupStorageSize,
    maxComputeInvocationsPerWorkgroup: lim.maxComputeInvocationsPerWorkgroup,
    maxComputeWorkgroupSizeX: lim.maxComputeWorkgroupSizeX,
    maxComputeWorkgroupSizeY: lim.maxComputeWorkgroupSizeY,
    maxComputeWorkgroupsPerDimension: lim.maxComputeWorkgroupsPerDimension,
  };
  // Timestamps are only used by the opt-in kernel profiler, but must be requested up front.
  const requiredFeatures: GPUFeatureName[] = adapter.features.has('timestamp-query') ? ['timestamp-query'] : [];
  const device = await adapter.requestDevice({ requiredLimits, requiredFeatures, label: 'tabfleet' });
  const info = adapter.info ?? ({} as GPUAdapterInfo);
  const text = `${info.vendor ?? ''} ${info.architecture ?? ''} ${info.device ?? ''} ${info.description ?? ''}`.toLowerCase();
  return {
    device,
    adapter: {
      vendor: info.vendor ?? '',
      architecture: info.architecture ?? '',
      device: info.device ?? '',
      description: info.description ?? '',
      isCpu: text.includes('swiftshader') || text.includes('llvmpipe') || text.includes('lavapipe') || text.trim() === '',
      features: [...adapter.features],
      maxStorageBufferBindingSize: lim.maxStorageBufferBindingSize,
      maxBufferSize: lim.maxBufferSize,
    },
  };
}

function pick(l: GPUSupportedLimits) {
  return {
    maxStorageBuffersPerShaderStage: l.maxStorageBuffersPerShaderStage,
    maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
    maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
    maxComputeWorkgroupSizeX: l.maxComputeWorkgroupSizeX,
    maxComputeWorkgroupSizeY: l.maxComputeWorkgroupSizeY,
    maxComputeWorkgroupsPerDimension: l.maxComputeWorkgroupsPerDimension,
  };
}
