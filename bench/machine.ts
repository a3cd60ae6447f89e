// The machine a benchmark ran on and the run record every bench JSON carries (scripts/run-record.ts),
// and the command line that repeats a benchmark run.
export { commitOf, machineInfo, missingRecord, runRecord } from '../scripts/run-record';

/**
 * The `npm run bench` line that repeats a run with these options. Built from the options rather than
 * process.argv, because tests call a benchmark's run() directly and argv would then name the test.
 */
export function benchCommand(name: string, opts: { runs: number; quick: boolean; out?: string; only?: string[] }): string {
  const defaultRuns = opts.quick ? 2 : 5;
  return [
    `npm run bench -- ${name}`,
    opts.quick ? '--quick' : '',
    opts.runs !== defaultRuns ? `--runs ${opts.runs}` : '',
    opts.only?.length ? `--only ${opts.only.join(',')}` : '',
    opts.out ? `--out ${opts.out}` : '',
  ].filter(Boolean).join(' ');
}
