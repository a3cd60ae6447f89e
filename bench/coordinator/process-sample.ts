// What a forked server of the coordinator bench (server-process.ts, floor-server.ts) reports about
// itself when asked: memory (after a full GC when asked and run with --expose-gc), and the CPU and
// wall time since its previous sample.
let lastCpu = process.cpuUsage();
let lastWall = performance.now();

export interface ProcessSample {
  mem: NodeJS.MemoryUsage;
  cpuMs: number;
  wallMs: number;
  /** A full GC ran before the memory was read. */
  gc: boolean;
}

export function sampleProcess(gc: boolean): ProcessSample {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (gc && collect) {
    collect();
    collect();
  }
  const mem = process.memoryUsage();
  const cpu = process.cpuUsage(lastCpu);
  const wall = performance.now();
  const sample = { mem, cpuMs: (cpu.user + cpu.system) / 1000, wallMs: wall - lastWall, gc: gc && !!collect };
  lastCpu = process.cpuUsage();
  lastWall = wall;
  return sample;
}
