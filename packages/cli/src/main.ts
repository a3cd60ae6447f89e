// `tabfleet`: the researcher's command line over the server's HTTP API. Subcommands in the style of gh
// and wandb, `--json` on each, progress bars on a terminal's stderr, and exit codes a script can trust.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { apiFor, type Command } from './command';
import { download } from './commands/download';
import { login } from './commands/login';
import { ls } from './commands/ls';
import { stop } from './commands/stop';
import { submit } from './commands/submit';
import { upload } from './commands/upload';
import { DEFAULT_INTERVAL_S, watch } from './commands/watch';
import { CliError, EXIT, KIND_OF, type ExitCode } from './errors';
import { Output, type Io } from './output';

export const COMMANDS: Command[] = [login, submit, ls, watch, stop, download, upload];

const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export function helpText(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return [
    'tabfleet: train on a tabfleet server from the command line',
    '',
    'Usage: tabfleet COMMAND [ARGS] [--json]      tabfleet COMMAND --help for its options',
    '',
    'Commands:',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'Every command takes --json: one JSON document on stdout and nothing else there (watch: one JSON',
    'object a line). Errors go to stderr, and with --json also to stdout as {"error":{"kind","message"}}.',
    'Progress bars are drawn on stderr, only when it is a terminal.',
    '',
    'Exit codes:',
    '  0  ok (watch: the job finished)',
    '  1  the server refused or failed (409, 429, 5xx), the job failed or was stopped, a digest did not match',
    '  2  bad command line or bad input (a job file that fails the schema, a 400 from the server)',
    '  3  not logged in, or the token was refused (401/403)',
    '  4  not found (no such job or checkpoint: 404)',
    '  5  network: the server could not be reached (refused, DNS, TLS, timeout)',
    '',
    'Environment:',
    '  TABFLEET_SERVER, TABFLEET_TOKEN  override the stored server URL and researcher token',
    '  TABFLEET_CONFIG                  the config file (default ~/.config/tabfleet/config.json, or under $XDG_CONFIG_HOME; 0600)',
    '  NODE_EXTRA_CA_CERTS              a PEM file of extra CAs, for an https:// server with a private CA',
    '',
    `watch polls the job every ${DEFAULT_INTERVAL_S} s (--interval), its metrics when it moved. The token travels as`,
    'Authorization: Bearer; use https:// for any server that is not on this machine.',
  ].join('\n');
}

function commandHelp(c: Command): string {
  const flags = Object.entries(c.options).map(([name, o]) => `--${name}${o.short ? `/-${o.short}` : ''}`).concat('--json');
  return [`Usage: ${c.usage} [--json]`, '', c.summary, '', ...c.help, '', `Options: ${flags.join(' ')}`].join('\n');
}

/** Prints a failure: a line (and its details) on stderr; with --json, the same as one JSON document on stdout. */
function report(e: CliError, io: Io, json: boolean): ExitCode {
  io.stderr.write(`tabfleet: ${e.message}\n${e.details.map((d) => `  ${d}\n`).join('')}`);
  if (json) {
    const error = { kind: KIND_OF[e.exit], exit: e.exit, message: e.message, details: e.details, ...(e.serverCode ? { code: e.serverCode } : {}) };
    io.stdout.write(`${JSON.stringify({ error })}\n`);
  }
  return e.exit;
}

const processIo = (): Io => ({ stdout: process.stdout, stderr: process.stderr, stdin: process.stdin, env: process.env });

/** Runs one command line and returns its exit code. */
export async function main(argv: string[], io: Io = processIo()): Promise<number> {
  const json = argv.includes('--json');
  const name = argv.find((a) => !a.startsWith('-'));
  if (argv.includes('--version') && !name) {
    new Output(io, json).result({ version: VERSION }, VERSION);
    return EXIT.ok;
  }
  if (!name || name === 'help') {
    const topic = name && COMMANDS.find((c) => c.name === argv[argv.indexOf(name) + 1]);
    if (!name && !argv.some((a) => a === '--help' || a === '-h')) {
      io.stderr.write(`${helpText()}\n`);
      return EXIT.usage;
    }
    io.stdout.write(`${topic ? commandHelp(topic) : helpText()}\n`);
    return EXIT.ok;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) return report(new CliError(EXIT.usage, `unknown command ${JSON.stringify(name)}: tabfleet --help lists them`), io, json);
  const rest = argv.filter((a, i) => i !== argv.indexOf(name));
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: rest, options: { ...command.options, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
  } catch (e) {
    return report(new CliError(EXIT.usage, `${(e as Error).message}`, [`usage: ${command.usage}`]), io, json);
  }
  if (parsed.values.help) {
    io.stdout.write(`${commandHelp(command)}\n`);
    return EXIT.ok;
  }
  const out = new Output(io, json);
  try {
    return await command.run({ args: parsed.positionals, values: parsed.values as Record<string, string | boolean | undefined>, out, io, api: apiFor(io) });
  } catch (e) {
    if (e instanceof CliError) return report(e, io, json);
    return report(new CliError(EXIT.failure, `internal error: ${(e as Error).stack ?? e}`), io, json);
  }
}
