// The checks every inbound Socket.IO event passes before a handler sees it: a token bucket per
// socket (floods end in a disconnect), the event's size bound on its raw argument, binary
// attachments at any depth included, measured before anything parses or serializes it
// (`measureWire`, `eventSizeLimit`), schema validation, and a reply that is always an ack with a
// code (or a `protocol:error` event when the client sent no ack).
import { eventSizeLimit, LIMITS, measureWire, ProtocolError, parseEvent, type Ack, type SizeLimit } from '@tabfleet/protocol';
import type { z } from 'zod';
import type { Count } from '../metrics-catalogue';
import type { VolunteerConnection } from './connection';

/** What the guard uses of a socket: Socket.IO's, or a lean volunteer connection. */
type Socket = Pick<VolunteerConnection, 'id' | 'emit' | 'disconnect' | 'onAny' | 'textPacketBytes'>;

/**
 * How many times its JSON text a value decoded from it can measure when written again: strings and
 * structure only shrink (escapes, whitespace, repeated keys), and the worst number is "1e20", 4
 * characters that JSON.stringify writes as 21.
 */
export const JSON_REWRITE_GROWTH = 21 / 4;

/**
 * Whether the event's argument is within `limit` without walking it: it came from a text packet with
 * no binary of `textPacketBytes` bytes (its UTF-8 length bounds its characters), small enough that even
 * written out at the worst growth it fits. Round events are a few hundred bytes; their walk was 2.6% of a
 * busy server's time at 10,000 volunteers.
 */
export function withinLimitByPacketSize(textPacketBytes: number | undefined, limit: SizeLimit): boolean {
  return !!textPacketBytes && textPacketBytes * JSON_REWRITE_GROWTH <= limit.bytes;
}

export class TokenBucket {
  private tokens: number;
  private last: number;
  private windowStart: number;
  /** Events refused within the current flood window. */
  refusedInWindow = 0;

  constructor(
    private readonly ratePerSec: number,
    private readonly burst: number,
    private readonly now: () => number,
  ) {
    this.tokens = burst;
    this.last = now();
    this.windowStart = this.last;
  }

  take(): boolean {
    const t = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) / 1000) * this.ratePerSec);
    this.last = t;
    if (t - this.windowStart > LIMITS.floodWindowMs) {
      this.windowStart = t;
      this.refusedInWindow = 0;
    }
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return true;
    }
    this.refusedInWindow++;
    return false;
  }
}

/** An event's handler: its parsed payload, and the socket it came on (so one set of handlers serves every socket). */
export type Handler = (payload: never, socket: never) => Promise<object | void> | object | void;

export interface GuardOptions {
  schemas: Record<string, z.ZodType>;
  handlers: Record<string, Handler>;
  count: Count;
  log(message: string): void;
  /** The per-socket event bucket's time in ms (Date.now unless given). */
  now?: () => number;
}

/**
 * Routes every event on `socket` through rate limit, size and schema checks to its handler, and
 * answers with `Ack`. Unknown events and bad payloads change nothing.
 */
export function guardSocket(socket: Socket, opts: GuardOptions): void {
  const bucket = new TokenBucket(LIMITS.eventsPerSecond, LIMITS.eventBurst, opts.now ?? Date.now);
  socket.onAny((event: unknown, ...args: unknown[]) => guardEvent(socket, bucket, opts, event, args));
}

/** The ack the client asked for, if any (the last argument when it is a function). */
type AckFn = ((a: Ack) => void) | null;

/**
 * One inbound event. Plain functions, not closures made per event (every event passes here, and under
 * tsx each closure made also names itself); the handler runs at once, and a client that asked for no
 * ack costs nothing more once it succeeded.
 */
function guardEvent(socket: Socket, bucket: TokenBucket, opts: GuardOptions, event: unknown, args: unknown[]): void {
  const ack = typeof args[args.length - 1] === 'function' ? (args.pop() as (a: Ack) => void) : null;
  // Only a string names an event: anything else (a Buffer, an object) is never turned into text here.
  const name = typeof event === 'string' ? event : '';
  if (!bucket.take()) {
    refuse(socket, opts, ack, event, new ProtocolError('rate_limited', `more than ${LIMITS.eventsPerSecond} events/s`));
    if (bucket.refusedInWindow >= LIMITS.floodDisconnectAfter) {
      opts.log(`disconnecting ${socket.id}: event flood`);
      socket.emit('protocol:error', { event: shownName(event), code: 'rate_limited', message: 'event flood: disconnecting' });
      socket.disconnect(true);
    }
    return;
  }
  const schema = Object.hasOwn(opts.schemas, name) ? opts.schemas[name] : undefined;
  if (!schema) return refuse(socket, opts, ack, event, new ProtocolError('unknown_event', `unknown event ${JSON.stringify(shownName(event))}`));
  if (args.length !== 1) return refuse(socket, opts, ack, event, new ProtocolError('bad_request', `${name}: expected one argument and an ack, got ${args.length} arguments`));
  const limit = eventSizeLimit(name);
  if (!withinLimitByPacketSize(socket.textPacketBytes, limit) && measureWire(args[0], limit).over) return refuse(socket, opts, ack, event, new ProtocolError('too_large', tooLarge(name, limit)));
  let result: ReturnType<Handler>;
  try {
    result = opts.handlers[name](parseEvent(schema, args[0], name) as never, socket as never);
  } catch (e) {
    return failed(socket, opts, ack, event, e);
  }
  if (result instanceof Promise) result.then((r) => answered(ack, r), (e: unknown) => failed(socket, opts, ack, event, e));
  else answered(ack, result);
}

function shownName(event: unknown): string {
  return typeof event === 'string' ? event.slice(0, 80) : `(a ${typeof event}, not an event name)`;
}

function answered(ack: AckFn, result: object | void): void {
  if (ack) ack({ ok: true, ...(result ?? {}) });
}

/** A refusal: the ack's error, or a `protocol:error` event when the client asked for no ack. */
function refuse(socket: Socket, opts: GuardOptions, ack: AckFn, event: unknown, e: ProtocolError): void {
  opts.count('events_rejected', { code: e.code });
  if (ack) ack({ ok: false, error: e.toBody() });
  else socket.emit('protocol:error', { event: shownName(event), ...e.toBody() });
}

function failed(socket: Socket, opts: GuardOptions, ack: AckFn, event: unknown, e: unknown): void {
  if (e instanceof ProtocolError) return refuse(socket, opts, ack, event, e);
  opts.log(`${typeof event === 'string' ? event : '?'} from ${socket.id} failed: ${(e as Error).stack ?? e}`);
  refuse(socket, opts, ack, event, new ProtocolError('internal', 'internal error'));
}

function tooLarge(name: string, limit: SizeLimit): string {
  const besides = limit.attachment ? ` besides its \`${limit.attachment.field}\` (binary, at most ${limit.attachment.bytes} bytes)` : '';
  return `${name}: more than ${limit.bytes} bytes of JSON and binary${besides}, or not JSON and binary`;
}
