// `tabfleet login`: checks that the URL is a tabfleet server and that it takes the token, then stores both.
import { Api } from '../api';
import type { Command } from '../command';
import { readAll } from '../command';
import { configPath, normalizeServer, writeConfig } from '../config';
import { CliError, EXIT } from '../errors';

export const login: Command = {
  name: 'login',
  usage: 'tabfleet login --server URL --token TOKEN',
  summary: 'check a server and a researcher token, and store them (0600)',
  help: [
    'Asks /healthz (is it a tabfleet server?) and /api/jobs (does it take the token?) before writing anything.',
    '--token - reads the token from stdin (keeps it out of the shell history).',
    'Defaults: TABFLEET_SERVER and TABFLEET_TOKEN. Stored in $TABFLEET_CONFIG or ~/.config/tabfleet/config.json.',
  ],
  options: { server: { type: 'string' }, token: { type: 'string' } },
  async run({ values, io, out }) {
    const rawServer = (values.server as string | undefined) ?? io.env.TABFLEET_SERVER;
    let token = (values.token as string | undefined) ?? io.env.TABFLEET_TOKEN;
    if (!rawServer) throw new CliError(EXIT.usage, 'give --server URL (or set TABFLEET_SERVER)');
    if (token === '-') token = (await readAll(io.stdin)).toString('utf8').trim();
    if (!token) throw new CliError(EXIT.usage, 'give --token TOKEN, --token - to read it from stdin, or set TABFLEET_TOKEN');
    const server = normalizeServer(rawServer);
    const api = new Api({ server, token });
    const health = await api.json<{ ok?: boolean; node?: string }>('GET', '/healthz', undefined, `${server}/healthz`);
    if (health.ok !== true) throw new CliError(EXIT.failure, `${server}/healthz did not answer { ok: true }: is it a tabfleet server?`);
    const { jobs } = await api.json<{ jobs: unknown[] }>('GET', '/api/jobs', undefined, 'the token check');
    const path = configPath(io.env);
    writeConfig(path, { server, token });
    out.result({ server, node: health.node ?? null, jobs: jobs.length, config: path }, `logged in to ${server} (${jobs.length} jobs); saved to ${path}`);
    return EXIT.ok;
  },
};
