// `tabfleet ls`: the jobs as a table (or their summaries as JSON).
import { targetStepsOf, type JobSummary } from '@tabfleet/protocol';
import type { Command } from '../command';
import { EXIT } from '../errors';
import { table } from '../output';

const percent = (x: number | null) => (x === null ? '-' : `${(x * 100).toFixed(1)}%`);
const when = (ms: number) => new Date(ms).toISOString().slice(0, 16).replace('T', ' ');

export const ls: Command = {
  name: 'ls',
  usage: 'tabfleet ls',
  summary: 'list the jobs: state, steps towards the target, volunteers, accuracy',
  help: ['--json prints { "jobs": [ JobSummary, … ] } as GET /api/jobs answers it.'],
  options: {},
  async run({ out, api }) {
    const { jobs } = await api().json<{ jobs: JobSummary[] }>('GET', '/api/jobs', undefined, 'list jobs');
    const rows = jobs.map((j) => [j.id, j.name, j.state, `${j.step}/${targetStepsOf(j.spec)}`, String(j.workers), percent(j.latestAccuracy), when(j.createdAt)]);
    out.result({ jobs }, jobs.length ? table(['ID', 'NAME', 'STATE', 'STEP', 'VOLUNTEERS', 'ACCURACY', 'CREATED (UTC)'], rows) : 'no jobs');
    return EXIT.ok;
  },
};
