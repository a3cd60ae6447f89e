// Where the server URL and researcher token live between commands: one JSON file readable by its
// owner only (0600, in a 0700 folder), which TABFLEET_SERVER and TABFLEET_TOKEN override.
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { CliError, EXIT } from './errors';

export interface Credentials {
  server: string;
  token: string;
}

type Env = Record<string, string | undefined>;

/** `$TABFLEET_CONFIG`, else `$XDG_CONFIG_HOME/tabfleet/config.json`, else `~/.config/tabfleet/config.json`. */
export function configPath(env: Env = process.env): string {
  if (env.TABFLEET_CONFIG) return env.TABFLEET_CONFIG;
  return join(env.XDG_CONFIG_HOME || join(homedir(), '.config'), 'tabfleet', 'config.json');
}

export function readConfig(path: string): Partial<Credentials> {
  if (!existsSync(path)) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new CliError(EXIT.usage, `${path} is not valid JSON (${(e as Error).message}): run tabfleet login again`);
  }
  const o = (parsed ?? {}) as Record<string, unknown>;
  return { server: typeof o.server === 'string' ? o.server : undefined, token: typeof o.token === 'string' ? o.token : undefined };
}

/** Writes the file whole (a temporary file renamed over it), created 0600; an existing file is narrowed to 0600 too. */
export function writeConfig(path: string, creds: Credentials): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(creds, null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600); // the umask cannot widen it, but an old temporary file could have another mode
  renameSync(tmp, path);
}

/** An http(s) URL without a trailing slash, or a usage error. */
export function normalizeServer(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new CliError(EXIT.usage, `--server must be a URL such as https://tabfleet.example.org (got ${JSON.stringify(raw)})`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CliError(EXIT.usage, `--server must be http:// or https:// (got ${url.protocol})`);
  if (url.search || url.hash) throw new CliError(EXIT.usage, '--server takes no query or fragment');
  return url.href.replace(/\/+$/, '');
}

/** The server and token a command uses: the environment first, then the config file. */
export function resolveCredentials(env: Env = process.env): Credentials {
  const file = readConfig(configPath(env));
  const server = env.TABFLEET_SERVER || file.server;
  const token = env.TABFLEET_TOKEN || file.token;
  if (!server || !token) {
    const missing = [!server && 'server', !token && 'token'].filter(Boolean).join(' and ');
    throw new CliError(EXIT.auth, `no ${missing}: run tabfleet login --server URL --token TOKEN (or set TABFLEET_SERVER and TABFLEET_TOKEN)`);
  }
  return { server: normalizeServer(server), token };
}
