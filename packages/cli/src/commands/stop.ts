// `tabfleet stop ID`: stops a job that is waiting or running (a job that has ended is a 409: exit 1).
import type { JobSummary } from '@tabfleet/protocol';
import { jobPath } from '../api';
import type { Command } from '../command';
import { CliError, EXIT } from '../errors';

export const stop: Command = {
  name: 'stop',
  usage: 'tabfleet stop ID',
  summary: 'stop a waiting or running job',
  help: ['A job that has already ended is refused by the server (exit 1); an unknown id is exit 4.'],
  options: {},
  async run({ args, out, api }) {
    if (args.length !== 1) throw new CliError(EXIT.usage, 'give one job id: tabfleet stop ID');
    const { job } = await api().json<{ job: JobSummary }>('POST', jobPath(args[0], '/stop'), undefined, `stop ${args[0]}`);
    out.result({ job }, `stopped ${job.id} (${job.state} at step ${job.step})`);
    return EXIT.ok;
  },
};
