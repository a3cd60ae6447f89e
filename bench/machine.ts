// The machine a benchmark ran on and the run record every bench JSON carries (scripts/run-record.ts),
// the command line that repeats a benchmark run, and the earlier report a `--only` run re-runs into.
import { existsSync, readFileSync } from 'node:fs';

export { commitOf, machineInfo, missingRecord, runRecord } from '../scripts/run-record';

/**
 * The `npm run bench` line that repeats a run with these options. Built from the options rather than
 * process.argv, because tests call a benchmark's run() directly and argv would then name the test.
 * The TABFLEET_BENCH_* knobs set for the run (steps, niceness, sections) lead it, as a shell would take them.
 */
export function benchCommand(name: string, opts: { runs: number; quick: boolean; out?: string; only?: string[] }, env: NodeJS.ProcessEnv = process.env): string {
  const defaultRuns = opts.quick ? 2 : 5;
  const knobs = Object.keys(env).filter((k) => k.startsWith('TABFLEET_BENCH_') && env[k] !== undefined).sort();
  return [
    ...knobs.map((k) => `${k}=${shellWord(env[k]!)}`),
    `npm run bench -- ${name}`,
    opts.quick ? '--quick' : '',
    opts.runs !== defaultRuns ? `--runs ${opts.runs}` : '',
    opts.only?.length ? `--only ${opts.only.join(',')}` : '',
    opts.out ? `--out ${opts.out}` : '',
  ].filter(Boolean).join(' ');
}

/** `value` as one shell word: bare when it is plainly safe, else in single quotes. */
function shellWord(value: string): string {
  return /^[\w.,:/=+-]+$/.test(value) ? value : `'${value.replaceAll("'", "'\\''")}'`;
}

/**
 * The report at `file` that `--only` re-runs sections of: each named section must be one of
 * `rerunnable`, the report must exist, and be of the same kind (quick or full) as this run.
 */
export function earlierReport(file: string, opts: { quick: boolean; only?: string[] }, rerunnable: readonly string[]) {
  const unknown = (opts.only ?? []).filter((x) => !rerunnable.includes(x));
  if (unknown.length) throw new Error(`--only: ${unknown.join(', ')} cannot run alone (sections that can: ${rerunnable.join(', ')})`);
  if (!existsSync(file)) throw new Error(`--only needs an earlier report at ${file}`);
  const report = JSON.parse(readFileSync(file, 'utf8'));
  if (report.quick !== opts.quick) throw new Error(`${file} is a ${report.quick ? 'quick' : 'full'} report`);
  return report;
}
