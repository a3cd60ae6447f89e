// The CPU time of a process and everything under it, from /proc (Linux only): what a test file
// really costs the machine. A file's wall time in the suite says more about what ran beside it (one
// file with eight Chromium tabs took 2.5x longer beside another than alone beside a busy loop), so the
// runner ranks files by this instead.
import { existsSync, readFileSync, readdirSync } from 'node:fs';

const CLOCK_TICKS = 100;

export const canMeasureProcessCpu = () => existsSync('/proc/self/stat');

/** Every live process's parent and its CPU seconds so far: its own and its reaped children's. */
function readProcesses() {
  const processes = new Map();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // it exited while we looked
    }
    // After the command name (in parentheses, which may hold spaces): state, ppid, ..., utime (14th
    // field), stime, cutime, cstime.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    processes.set(Number(name), { parent: Number(fields[1]), seconds: ticks / CLOCK_TICKS });
  }
  return processes;
}

/**
 * CPU seconds of each root's tree (live processes, and the children they reaped), in one pass over
 * /proc. A tree whose root is gone reads 0; callers keep their last reading.
 */
export function treeCpuSeconds(roots) {
  const processes = readProcesses();
  const children = new Map();
  for (const [pid, p] of processes) children.set(p.parent, [...(children.get(p.parent) ?? []), pid]);
  return roots.map((root) => {
    let total = 0;
    const stack = processes.has(root) ? [root] : [];
    while (stack.length) {
      const pid = stack.pop();
      total += processes.get(pid).seconds;
      stack.push(...(children.get(pid) ?? []));
    }
    return total;
  });
}
