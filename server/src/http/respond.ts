// Small HTTP helpers: JSON bodies with a size bound, JSON and error replies with status codes that
// follow the protocol's error codes.
import { LIMITS, ProtocolError, type ErrorCode } from '@tabfleet/protocol';
import type { IncomingMessage, ServerResponse } from 'node:http';

/** The HTTP status of each refusal's code. */
export const STATUS: Record<ErrorCode, number> = {
  bad_request: 400, unknown_event: 400, too_large: 413, protocol_version: 400, unauthorized: 401, unknown_job: 404, not_member: 403,
  not_neighbour: 403, stale_round: 409, rate_limited: 429, conflict: 409, bad_tensor: 400, capacity: 503, internal: 500,
};

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store', ...headers }).end(text);
}

/** Seconds a client waits before asking again after a refusal that passes (429, 503). */
const RETRY_AFTER_SECONDS = 1;

export function sendError(res: ServerResponse, e: unknown): void {
  const err = e instanceof ProtocolError ? e : new ProtocolError('internal', 'internal error');
  const status = STATUS[err.code];
  const passes = (status === 429 || status === 503) && !res.hasHeader('retry-after'); // a limiter may have said how long
  sendJson(res, status, { error: err.toBody() }, passes ? { 'retry-after': String(RETRY_AFTER_SECONDS) } : {});
}

export function sendBytes(res: ServerResponse, contentType: string, bytes: Uint8Array, filename?: string): void {
  res.writeHead(200, {
    'content-type': contentType,
    'content-length': bytes.byteLength,
    ...(filename ? { 'content-disposition': `attachment; filename="${filename}"` } : {}),
  }).end(bytes);
}

/** Reads a JSON body of at most LIMITS.maxHttpJsonBytes. */
/** A raw body of at most `max` bytes (`what` names it in the refusal). */
export async function readBytes(req: IncomingMessage, max: number, what: string): Promise<Uint8Array> {
  const tooLarge = () => new ProtocolError('too_large', `${what} is at most ${max} bytes`);
  if (Number(req.headers['content-length'] ?? 0) > max) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > max) throw tooLarge();
    chunks.push(chunk as Buffer);
  }
  return new Uint8Array(Buffer.concat(chunks));
}

export async function readJson(req: IncomingMessage): Promise<unknown> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > LIMITS.maxHttpJsonBytes) throw new ProtocolError('too_large', `body over ${LIMITS.maxHttpJsonBytes} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > LIMITS.maxHttpJsonBytes) throw new ProtocolError('too_large', `body over ${LIMITS.maxHttpJsonBytes} bytes`);
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null');
  } catch {
    throw new ProtocolError('bad_request', 'body is not valid JSON');
  }
}
