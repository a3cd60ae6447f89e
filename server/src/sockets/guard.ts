// The checks every inbound Socket.IO event passes before a handler sees it: a token bucket per
// socket (floods end in a disconnect), a size bound on JSON arguments, schema validation, and a reply
// that is always an ack with a code (or a `protocol:error` event when the client sent no ack).
import { LIMITS, ProtocolError, parseEvent, type Ack } from '@tabfleet/protocol';
import type { Socket } from 'socket.io';
import type { z } from 'zod';

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

/** Size of the JSON part of an argument; binary fields count as nothing here (Socket.IO caps them). */
export function jsonSize(value: unknown): number {
  try {
    // Most events carry no binary: skip the replacer's per-key call for them.
    if (value && typeof value === 'object' && !Object.values(value).some((v) => v instanceof Uint8Array || v instanceof ArrayBuffer)) return JSON.stringify(value)?.length ?? 0;
    // A Buffer has been through its toJSON before the replacer sees it.
    const binary = (v: unknown) => v instanceof Uint8Array || v instanceof ArrayBuffer || (!!v && (v as { type?: unknown }).type === 'Buffer' && Array.isArray((v as { data?: unknown }).data));
    return JSON.stringify(value, (_k, v) => (binary(v) ? null : v))?.length ?? 0;
  } catch {
    return Infinity; // cyclic or otherwise unserializable
  }
}

export type Handler = (payload: never) => Promise<object | void> | object | void;

export interface GuardOptions {
  schemas: Record<string, z.ZodType>;
  handlers: Record<string, Handler>;
  count(name: string, labels?: Record<string, string>): void;
  log(message: string): void;
  now?: () => number;
}

/**
 * Routes every event on `socket` through rate limit, size and schema checks to its handler, and
 * answers with `Ack`. Unknown events and bad payloads change nothing.
 */
export function guardSocket(socket: Socket, opts: GuardOptions): void {
  const bucket = new TokenBucket(LIMITS.eventsPerSecond, LIMITS.eventBurst, opts.now ?? Date.now);
  socket.onAny((event: unknown, ...args: unknown[]) => {
    const ack = typeof args[args.length - 1] === 'function' ? (args.pop() as (a: Ack) => void) : null;
    const reply = (a: Ack) => {
      if (ack) ack(a);
      else if (!a.ok) socket.emit('protocol:error', { event: String(event), ...a.error });
    };
    const refuse = (e: ProtocolError) => {
      opts.count('events_rejected', { code: e.code });
      reply({ ok: false, error: e.toBody() });
    };
    if (!bucket.take()) {
      refuse(new ProtocolError('rate_limited', `more than ${LIMITS.eventsPerSecond} events/s`));
      if (bucket.refusedInWindow >= LIMITS.floodDisconnectAfter) {
        opts.log(`disconnecting ${socket.id}: event flood`);
        socket.emit('protocol:error', { event: String(event), code: 'rate_limited', message: 'event flood: disconnecting' });
        socket.disconnect(true);
      }
      return;
    }
    const name = typeof event === 'string' ? event : '';
    const schema = Object.hasOwn(opts.schemas, name) ? opts.schemas[name] : undefined;
    if (!schema) return refuse(new ProtocolError('unknown_event', `unknown event ${JSON.stringify(String(event)).slice(0, 80)}`));
    if (args.length !== 1) return refuse(new ProtocolError('bad_request', `${name}: expected one argument and an ack, got ${args.length} arguments`));
    if (jsonSize(args[0]) > LIMITS.maxEventBytes) return refuse(new ProtocolError('too_large', `${name}: more than ${LIMITS.maxEventBytes} bytes of JSON`));
    let payload: unknown;
    try {
      payload = parseEvent(schema, args[0], name);
    } catch (e) {
      return refuse(e as ProtocolError);
    }
    Promise.resolve()
      .then(() => opts.handlers[name](payload as never))
      .then((result) => reply({ ok: true, ...(result ?? {}) }))
      .catch((e: unknown) => {
        if (e instanceof ProtocolError) return refuse(e);
        opts.log(`${name} from ${socket.id} failed: ${(e as Error).stack ?? e}`);
        refuse(new ProtocolError('internal', 'internal error'));
      });
  });
}
