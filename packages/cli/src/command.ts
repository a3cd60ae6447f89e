// What a subcommand is: its name, help, options (node:util parseArgs) and what it runs.
import type { ParseArgsConfig } from 'node:util';
import { Api } from './api';
import { resolveCredentials } from './config';
import type { Io, Output } from './output';

export interface CommandContext {
  args: string[];
  values: Record<string, string | boolean | undefined>;
  out: Output;
  io: Io;
  /** The API client for the stored or environment credentials (throws the auth error when there are none). */
  api(): Api;
}

export interface Command {
  name: string;
  /** `tabfleet NAME …` as the help prints it. */
  usage: string;
  summary: string;
  /** Lines under the usage in `tabfleet NAME --help`. */
  help: string[];
  options: NonNullable<ParseArgsConfig['options']>;
  /** The exit code (0 unless the command reports a failure it did not throw, such as a stopped job). */
  run(ctx: CommandContext): Promise<number>;
}

export function apiFor(io: Io): () => Api {
  return () => new Api(resolveCredentials(io.env));
}

/** Everything on a stream (stdin for `-`). */
export async function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks);
}
