// Exit codes a script can branch on, and the error that carries one to the top of `main`.

export const EXIT = {
  ok: 0,
  /** The server refused or failed (5xx, 409, 429), a job failed or was stopped, a digest did not match. */
  failure: 1,
  /** Bad command line or bad input file (a job spec that fails its schema, a 400 from the server). */
  usage: 2,
  /** No token, or the server refused it (401, 403). */
  auth: 3,
  /** No such job, checkpoint or route (404). */
  notFound: 4,
  /** The server could not be reached (refused, DNS, TLS, timeout). */
  network: 5,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** Machine-readable kinds, as `--json` prints them in `{ "error": { "kind", "message" } }`. */
export const KIND_OF: Record<ExitCode, string> = { 0: 'ok', 1: 'failure', 2: 'usage', 3: 'auth', 4: 'not_found', 5: 'network' };

export class CliError extends Error {
  constructor(
    readonly exit: ExitCode,
    message: string,
    /** Extra lines for a human (schema issues, hints), also in `--json` as `details`. */
    readonly details: string[] = [],
    /** The server's error code when it answered with one (`bad_request`, `unauthorized`, …). */
    readonly serverCode?: string,
  ) {
    super(message);
  }
}

/** The exit code an HTTP status stands for. */
export function exitForStatus(status: number): ExitCode {
  if (status === 401 || status === 403) return EXIT.auth;
  if (status === 404) return EXIT.notFound;
  if (status === 400 || status === 413 || status === 422) return EXIT.usage;
  return EXIT.failure;
}
