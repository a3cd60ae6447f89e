// Child of node-gpu.test.ts: makes two Dawn devices, runs a kernel on each, then exits with them alive
// (as `node --test-force-exit` does) and prints the thread counts it saw, the last from an exit listener
// registered after node-gpu's own.
import { readdirSync } from 'node:fs';
import { createNodeGpuBackend } from '../node-gpu';
import { tensor } from '../factory';
import { matmul } from '../ops/matmul';

const threads = () => readdirSync('/proc/self/task').length;

async function main(): Promise<void> {
  const beforeGpu = threads();
  for (let i = 0; i < 2; i++) {
    const gpu = await createNodeGpuBackend();
    const t = tensor(gpu, Float32Array.from([1, 2, 3, 4]), [2, 2]);
    await matmul(t, t).data();
  }
  const withDevices = threads();
  process.on('exit', () => console.log(JSON.stringify({ beforeGpu, withDevices, atExit: threads() })));
  process.exit(0);
}

void main();
