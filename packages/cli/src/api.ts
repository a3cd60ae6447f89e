// The server's HTTP API with the researcher token (Node's fetch), every failure turned into a
// CliError whose exit code says what went wrong: the server's refusal by its status, or the network.
import { idSchema } from '@tabfleet/protocol';
import { CliError, EXIT, exitForStatus } from './errors';
import type { Credentials } from './config';

/** A JSON request that has not answered in this long is given up as a network failure. */
const REQUEST_TIMEOUT_MS = 60_000;
/** Reads are sent again after a dropped connection or a 429/503, this many times in all. */
const READ_ATTEMPTS = 3;

const TLS_CODES = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED', 'ERR_TLS_CERT_ALTNAME_INVALID', 'CERT_UNTRUSTED',
]);

/** A fetch that threw (no HTTP answer) as a network CliError, with a hint for a private CA. */
export function networkError(server: string, e: unknown): CliError {
  const err = e as Error & { cause?: { code?: string; message?: string } };
  if (err.name === 'TimeoutError' || err.name === 'AbortError') return new CliError(EXIT.network, `${server} did not answer within ${REQUEST_TIMEOUT_MS / 1000} s`);
  const code = err.cause?.code ?? '';
  const why = err.cause?.message ?? err.message;
  const hints = TLS_CODES.has(code)
    ? ['the server\'s certificate is not trusted: for a private CA, set NODE_EXTRA_CA_CERTS=/path/to/ca.pem before running tabfleet']
    : [];
  return new CliError(EXIT.network, `cannot reach ${server}: ${why}${code && !why.includes(code) ? ` (${code})` : ''}`, hints);
}

/** The CliError for a non-2xx answer, with the server's own message when it sent one. */
export async function httpError(res: Response, what: string): Promise<CliError> {
  const text = await res.text().catch(() => '');
  let code: string | undefined, message = text.trim().slice(0, 500) || res.statusText;
  try {
    const body = JSON.parse(text) as { error?: { code?: string; message?: string } };
    if (body.error?.message) ({ code, message } = { code: body.error.code, message: body.error.message });
  } catch {
    /* not JSON: keep the text */
  }
  const hint = res.status === 401 ? ['check the token (tabfleet login), or TABFLEET_TOKEN if it is set'] : [];
  return new CliError(exitForStatus(res.status), `${what}: ${res.status} ${message}`, hint, code);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class Api {
  constructor(readonly creds: Credentials) {}

  url(path: string): string {
    return `${this.creds.server}${path}`;
  }

  /** A request with the token; reads are retried after a dropped connection or a passing refusal. Non-2xx answers throw. */
  async request(method: string, path: string, init: RequestInit & { what?: string; timeout?: boolean } = {}): Promise<Response> {
    const headers = { authorization: `Bearer ${this.creds.token}`, ...(init.headers as Record<string, string> | undefined) };
    const attempts = method === 'GET' ? READ_ATTEMPTS : 1;
    for (let attempt = 1; ; attempt++) {
      let res: Response;
      try {
        const signal = init.timeout === false ? undefined : AbortSignal.timeout(REQUEST_TIMEOUT_MS);
        res = await fetch(this.url(path), { ...init, method, headers, signal });
      } catch (e) {
        if (attempt < attempts) {
          await sleep(250 * attempt);
          continue;
        }
        throw networkError(this.creds.server, e);
      }
      if ((res.status === 429 || res.status === 503) && attempt < attempts) {
        await res.body?.cancel();
        await sleep(Math.min(10, Number(res.headers.get('retry-after')) || 1) * 1000);
        continue;
      }
      if (!res.ok) throw await httpError(res, init.what ?? `${method} ${path}`);
      return res;
    }
  }

  async json<T>(method: string, path: string, body?: unknown, what?: string): Promise<T> {
    const init: RequestInit & { what?: string } = { what };
    if (body !== undefined) Object.assign(init, { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
    const res = await this.request(method, path, init);
    try {
      return (await res.json()) as T;
    } catch (e) {
      throw new CliError(EXIT.failure, `${what ?? `${method} ${path}`}: the server's answer is not JSON (${(e as Error).message}); is ${this.creds.server} a tabfleet server?`);
    }
  }
}

/** A job id as the server accepts it in a path, or a usage error (nothing is sent). */
export function jobPath(id: string | undefined, tail = ''): string {
  if (!id) throw new CliError(EXIT.usage, 'give a job id (tabfleet ls lists them)');
  if (!idSchema.safeParse(id).success) throw new CliError(EXIT.usage, `${JSON.stringify(id)} is not a job id (letters, digits, _ and - only)`);
  return `/api/jobs/${id}${tail}`;
}
