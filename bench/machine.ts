// The machine a benchmark ran on, for every bench JSON.
import os from 'node:os';

export function machineInfo() {
  const cpus = os.cpus();
  return {
    /** 1, 5 and 15 minute load averages when the run ended: well above 1–2 suggests other work competed for the cores. */
    loadAverageAtEnd: os.loadavg(),
    cpuModel: cpus[0]?.model ?? 'unknown',
    cores: cpus.length,
    memoryBytes: os.totalmem(),
    platform: os.platform(),
    osRelease: os.release(),
    arch: os.arch(),
    node: process.version,
  };
}
