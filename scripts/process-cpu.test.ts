// The runner's CPU accounting: a child that burns CPU counts in its parent's tree after it has exited
// and been reaped (the runner samples live processes every second besides). Bounded in CPU time
// spent, not in wall time.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { canMeasureProcessCpu, treeCpuSeconds } from './process-cpu.mjs';

const BURN_MS = 400;
// Spins until the child itself has used BURN_MS of CPU (however busy the machine), then exits.
const burner = `const t = process.cpuUsage(); while ((process.cpuUsage(t).user + process.cpuUsage(t).system) / 1000 < ${BURN_MS}) {}`;

test('a child\'s CPU counts in its parent\'s tree once it has exited and been reaped; a missing root reads 0', async () => {
  assert.ok(canMeasureProcessCpu(), 'this machine has /proc');
  const [before] = treeCpuSeconds([process.pid]);
  const child = spawn(process.execPath, ['-e', burner], { stdio: 'ignore' });
  await new Promise((resolve) => child.on('exit', resolve));
  const [after] = treeCpuSeconds([process.pid]);
  assert.ok(after - before >= BURN_MS / 1000 - 0.02, `the tree gained ${(after - before).toFixed(2)} s for a child that used ${BURN_MS} ms`);
  assert.deepEqual(treeCpuSeconds([child.pid!]), [0], 'the exited child itself is gone');
});
