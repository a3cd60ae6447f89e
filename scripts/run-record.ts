// What every results file records about the run that made it (commit, date, command, machine,
// duration), and the check scripts/figures.test.ts applies to each. Here rather than in bench/ because
// `npm run fuzz` (scripts/fuzz.ts) records its runs too, and product scripts do not import bench code.
import os from 'node:os';
import { execFileSync } from 'node:child_process';

/** The machine a run ran on, for every results file. */
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

/** The commit measured (with `-dirty` when tracked files had uncommitted changes), or null outside a git checkout. */
export function commitOf(cwd = process.cwd()): string | null {
  try {
    const git = (...args: string[]) => execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return `${git('rev-parse', 'HEAD')}${git('status', '--porcelain', '--untracked-files=no') ? '-dirty' : ''}`;
  } catch {
    return null;
  }
}

/**
 * What every results file records about the run that made it, so a figure can be traced to the code
 * it measured: the commit, when it started, the command, the machine and how long it took (ms).
 * Call it when the run ends, with the epoch ms it started at. scripts/figures.test.ts checks every
 * file in bench/results has these fields.
 */
export function runRecord(startedAt: number, command = `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim()) {
  return {
    commit: commitOf(),
    date: new Date(startedAt).toISOString(),
    command,
    machine: machineInfo(),
    durationMs: Date.now() - startedAt,
  };
}

/** What a results file lacks of runRecord's fields; [] when it has them all. */
export function missingRecord(json: Record<string, unknown>): string[] {
  const missing: string[] = [];
  if (typeof json.commit !== 'string' || !/^[0-9a-f]{40}(-dirty)?$/.test(json.commit)) missing.push('commit');
  if (typeof json.date !== 'string' || Number.isNaN(Date.parse(json.date))) missing.push('date');
  if (typeof json.command !== 'string' || !json.command.startsWith('npm run ')) missing.push('command');
  if (json.machine === null || typeof json.machine !== 'object') missing.push('machine');
  // A backfilled file may say it has no duration: its run kept none, and none may be made up.
  const backfilledWithout = json.durationMs === null && typeof json.provenance === 'string' && json.provenance.includes('durationMs: the run recorded no duration');
  if (!(typeof json.durationMs === 'number' && json.durationMs >= 0) && !backfilledWithout) missing.push('durationMs');
  return missing;
}
