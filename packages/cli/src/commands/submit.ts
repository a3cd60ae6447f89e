// `tabfleet submit job.json`: the job spec is checked against the protocol's schema here first, so a
// bad file is refused with the path of each problem before anything reaches the server.
import { jobSpecSchema, targetStepsOf, type JobSummary } from '@tabfleet/protocol';
import { readFile } from 'node:fs/promises';
import type { Command } from '../command';
import { readAll } from '../command';
import { CliError, EXIT } from '../errors';

/** `hyperparameters.batchSize`, `gpt.layers`, `items[2].x`; the document itself is `(top level)`. */
export function issuePath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return '(top level)';
  return path.map((k, i) => (typeof k === 'number' ? `[${k}]` : `${i ? '.' : ''}${String(k)}`)).join('');
}

/** The parsed JSON of a job file, or a usage error naming the file and what is wrong with it. */
export async function readJobFile(file: string, stdin: NodeJS.ReadableStream): Promise<unknown> {
  let text: string;
  try {
    text = file === '-' ? (await readAll(stdin)).toString('utf8') : await readFile(file, 'utf8');
  } catch (e) {
    throw new CliError(EXIT.usage, `cannot read ${file}: ${(e as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new CliError(EXIT.usage, `${file} is not valid JSON: ${(e as Error).message}`);
  }
}

export const submit: Command = {
  name: 'submit',
  usage: 'tabfleet submit JOB.json',
  summary: 'check a job spec against the schema, then create the job; prints its id',
  help: [
    'JOB.json is a job spec as POST /api/jobs takes it (docs/protocol.md); - reads it from stdin.',
    'Every schema problem is printed with its path (e.g. hyperparameters.batchSize) and nothing is sent: exit 2.',
    'Prints the new job\'s id alone on stdout, so ID=$(tabfleet submit job.json) works.',
  ],
  options: {},
  async run({ args, io, out, api }) {
    if (args.length !== 1) throw new CliError(EXIT.usage, 'give one job file: tabfleet submit JOB.json');
    const file = args[0];
    const raw = await readJobFile(file, io.stdin);
    const checked = jobSpecSchema.safeParse(raw);
    if (!checked.success) {
      const issues = checked.error.issues.map((i) => `${issuePath(i.path)}: ${i.message}`);
      throw new CliError(EXIT.usage, `${file}: not a valid job spec (${issues.length} problem${issues.length === 1 ? '' : 's'})`, issues);
    }
    // What the file says goes to the server as written: it fills in the defaults itself.
    const { job } = await api().json<{ job: JobSummary }>('POST', '/api/jobs', raw, 'submit');
    out.result({ job }, job.id);
    if (!out.json) out.note(`submitted ${job.name}: ${job.state}, ${targetStepsOf(job.spec).toLocaleString('en')} steps to go; tabfleet watch ${job.id}`);
    return EXIT.ok;
  },
};
