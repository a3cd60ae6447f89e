// What a Socket.IO connection passes before any namespace sees it. Every engine handshake
// (`allowRequest`): the Host header, the Origin, a token from the per-address bucket HTTP requests
// take from too, and the per-address connection cap. A connection that holds no namespace socket for
// the grace period is closed: Socket.IO's `connectTimeout` from its opening, and here again whenever
// its last namespace socket has gone. Every namespace handshake takes another token (a failed
// researcher token several more, `FAILED_AUTH_COST`). And the packet decoder refuses what no
// legitimate client sends: a text message longer than any event, or more than one binary attachment
// in a packet (a packet waiting for its attachments would hold every one of them in memory).
import { LIMITS } from '@tabfleet/protocol';
import type { IncomingMessage } from 'node:http';
import type { Server, ServerOptions, Socket } from 'socket.io';
import * as parser from 'socket.io-parser';
import { clientAddress, FAILED_AUTH_COST, hostAllowed, originAllowed, type AddressRateLimiter, type HostPolicy, type TrustedProxies } from '../http/security';
import type { Count } from '../metrics-catalogue';

/** The longest text message a client has reason to send: an event's JSON and its envelope (namespace, ack id, event name). */
export const MAX_TEXT_MESSAGE = LIMITS.maxEventBytes + 1024;

/** socket.io-parser's decoder, refusing (the connection closes) text over MAX_TEXT_MESSAGE and packets with more than one attachment. */
class EdgeDecoder extends parser.Decoder {
  constructor() {
    super({ maxAttachments: 1 });
  }

  override add(obj: unknown): void {
    if (typeof obj === 'string' && obj.length > MAX_TEXT_MESSAGE) throw new Error(`a text message of ${obj.length} characters (no event is over ${MAX_TEXT_MESSAGE})`);
    super.add(obj);
  }
}

/**
 * Engine connections one address may hold beyond its volunteer connections: its dashboards, and
 * connections still joining. A volunteer over its own cap then hears why (`rate_limited` from the
 * namespace) before the engine refuses it bare.
 */
export const CONNECTION_SLACK = 8;

/** How long a connection may hold no namespace socket before it is closed (default). */
export const DEFAULT_JOIN_GRACE_MS = 5_000;

export interface EdgeOptions {
  hosts: HostPolicy;
  allowOrigins: readonly string[];
  /** The per-address bucket HTTP requests take from. */
  limiter: AddressRateLimiter;
  /** Socket.IO connections one address may hold at once on this node, joined to a namespace or not (volunteers' cap + CONNECTION_SLACK). */
  maxConnectionsPerAddress: number;
  joinGraceMs: number;
  /** Proxies whose X-Forwarded-For names the client (`clientAddress`); the address every limit and namespace then sees. */
  trustedProxies: TrustedProxies;
  count: Count;
  log(m: string): void;
}

/** An engine.io connection, as far as this file uses it. */
interface EngineConnection {
  remoteAddress: string;
  /** The handshake's HTTP request: engine.io keeps it for the connection's life unless dropped. */
  request?: unknown;
  readyState: string;
  close(): void;
  on(event: 'close', listener: (this: EngineConnection) => void): void;
}

export class SocketEdge {
  private readonly held = new Map<string, number>();
  /** Namespace sockets each open connection holds, and the timer that closes one that holds none. */
  private readonly joined = new WeakMap<EngineConnection, number>();
  private readonly emptyTimers = new WeakMap<EngineConnection, NodeJS.Timeout>();

  /**
   * The listeners every connection and socket gets, shared: each reads its connection from `this` (the
   * emitter, which emits 'close' and 'disconnect' once). A closure (and `once` wrapper) per connection
   * cost each of 10,000 volunteers their bytes.
   */
  private readonly onConnectionClose: (this: EngineConnection) => void;
  private readonly onLeave: (this: Socket) => void;

  constructor(private readonly opts: EdgeOptions) {
    const edge = this;
    this.onConnectionClose = function () {
      edge.release(this.remoteAddress);
    };
    this.onLeave = function () {
      edge.left(this.conn as unknown as EngineConnection);
    };
  }

  /** What `new Server(…)` takes from the edge. */
  serverOptions(): Pick<ServerOptions, 'allowRequest' | 'parser' | 'connectTimeout'> {
    return {
      allowRequest: (req, cb) => this.allowRequest(req, cb),
      parser: { ...parser, Decoder: EdgeDecoder },
      connectTimeout: this.opts.joinGraceMs,
    };
  }

  /** Counts engine connections per address and watches `namespaces` for connections left without a socket; registers the handshake's rate check first. */
  attach(io: Server, namespaces: readonly string[]): void {
    io.engine.on('connection', (conn: EngineConnection) => this.onConnection(conn));
    for (const name of namespaces) {
      const nsp = io.of(name);
      nsp.use((socket, next) => next(this.namespaceHandshake(socket.handshake.address) ?? undefined));
      nsp.on('connection', (socket: Socket) => this.onJoin(socket));
    }
  }

  /** A failed researcher token from `address`: it costs FAILED_AUTH_COST tokens more. */
  failedAuth(address: string): void {
    this.opts.limiter.charge(address, FAILED_AUTH_COST);
  }

  /**
   * An engine handshake's checks (Host, Origin, the per-address bucket, the connection cap): the
   * client's address, or why it is refused. Socket.IO's `allowRequest` and the lean volunteer
   * endpoint's upgrade both ask here.
   */
  admit(req: IncomingMessage): { address: string } | { code: string; message: string } {
    const refuse = (code: string, message: string) => {
      this.opts.count('handshakes_rejected', { code });
      return { code, message };
    };
    const address = clientAddress(req, this.opts.trustedProxies);
    if (!hostAllowed(req.headers.host, this.opts.hosts)) return refuse('bad_request', `Host ${JSON.stringify(req.headers.host?.slice(0, 100))} is not a name of this server`);
    if (!originAllowed(req, this.opts.allowOrigins)) return refuse('bad_request', 'origin not allowed');
    if (this.opts.limiter.take(address) > 0) return refuse('rate_limited', 'rate_limited: too many requests from this address');
    const held = this.held.get(address) ?? 0;
    if (held >= this.opts.maxConnectionsPerAddress) return refuse('rate_limited', `rate_limited: ${held} connections from this address already (at most ${this.opts.maxConnectionsPerAddress})`);
    return { address };
  }

  /**
   * Counts an open connection of `address`; false when that passes the cap (handshakes in flight
   * together all passed `admit` before any was counted): the caller closes it, and `release`s it
   * once it has closed, as for every connection held.
   */
  hold(address: string): boolean {
    const held = (this.held.get(address) ?? 0) + 1;
    this.held.set(address, held);
    if (held <= this.opts.maxConnectionsPerAddress) return true;
    this.opts.count('handshakes_rejected', { code: 'rate_limited' });
    return false;
  }

  release(address: string): void {
    const n = (this.held.get(address) ?? 1) - 1;
    if (n > 0) this.held.set(address, n);
    else this.held.delete(address);
  }

  /** A namespace handshake from `address` takes a token too: the refusal, or null. */
  namespaceHandshake(address: string): Error | null {
    const waitMs = this.opts.limiter.take(address);
    if (waitMs <= 0) return null;
    this.opts.count('handshakes_rejected', { code: 'rate_limited' });
    return Object.assign(new Error(`too many handshakes and requests from your address: try again in ${Math.ceil(waitMs / 1000)} s`), { data: { code: 'rate_limited' } });
  }

  private allowRequest(req: IncomingMessage, cb: (err: string | null | undefined, success: boolean) => void): void {
    const admitted = this.admit(req);
    if ('code' in admitted) cb(admitted.message, false);
    else cb(null, true);
  }

  private onConnection(conn: EngineConnection): void {
    // engine.io copied the TCP peer; behind a trusted proxy the client is the one it forwarded for.
    // Socket.IO's handshake.address (the volunteer's address in every namespace) is read from here.
    if (conn.request) conn.remoteAddress = clientAddress(conn.request as IncomingMessage, this.opts.trustedProxies);
    const address = conn.remoteAddress;
    // Socket.IO's memory guide: engine.io holds the handshake request (headers, socket, parser state)
    // for as long as the connection lives. Nothing here reads it after this point: the address is
    // `remoteAddress` (copied by engine.io at the handshake), Host, Origin and the rate check ran in
    // allowRequest, and namespace handshakes read only `handshake.auth` and `handshake.address`.
    // engine.io's WebSocketResponse still holds the request through a listener on the TCP socket until
    // it closes; what makes it large (its headers, raw and parsed, the query) is let go here.
    const req = conn.request as { rawHeaders: string[]; headers: object; url: string; _query?: object } | null | undefined;
    if (req) Object.assign(req, { rawHeaders: [], headers: {}, url: '', _query: {} });
    conn.request = null;
    const held = this.hold(address);
    conn.on('close', this.onConnectionClose);
    if (!held) conn.close();
  }

  /** A namespace socket of `conn` went: a connection left with none is closed after the grace. */
  private left(conn: EngineConnection): void {
    const n = (this.joined.get(conn) ?? 1) - 1;
    this.joined.set(conn, n);
    if (n > 0 || conn.readyState !== 'open') return;
    const timer = setTimeout(() => {
      if ((this.joined.get(conn) ?? 0) === 0 && conn.readyState === 'open') conn.close();
    }, this.opts.joinGraceMs);
    timer.unref();
    this.emptyTimers.set(conn, timer);
  }

  private onJoin(socket: Socket): void {
    const conn = socket.conn as unknown as EngineConnection;
    this.joined.set(conn, (this.joined.get(conn) ?? 0) + 1);
    clearTimeout(this.emptyTimers.get(conn));
    socket.on('disconnect', this.onLeave);
  }
}
