// A lean server for Socket.IO's wire protocol (Engine.IO v4, Socket.IO v5) on the `ws` package alone,
// for the library floor (floor-server.ts `lean`): what a volunteer connection would cost if the
// server kept a few fields per connection instead of Socket.IO's engine socket, client, namespace
// socket and their timers. It speaks to the real socket.io-client over WebSocket only (no polling),
// namespace "/" only, text packets only (no binary attachments), events with or without acks; one
// timer pings every connection and closes those that did not answer the last ping. Enough for the
// floor's rounds. The product's endpoint with the rest (binary attachments, the namespace, the edge and
// guard checks, cross-node delivery) is server/src/sockets/lean-volunteers.ts; this stays the floor.
import { randomBytes } from 'node:crypto';
import type { Server as HttpServer } from 'node:http';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';

export interface LeanOptions {
  pingIntervalMs: number;
  /** Largest text packet taken; larger ones close the connection (ws's maxPayload). */
  maxPayload: number;
}

type Handler = (...args: unknown[]) => void;

/** One connection: what the floor's round logic uses of a Socket.IO socket. */
export class LeanSocket {
  readonly id = randomBytes(12).toString('base64url');
  auth: unknown = undefined;
  /** Answered the last ping (or connected since). */
  alive = true;
  private handlers: Map<string, Handler> | null = null;
  readonly rooms: string[] = [];

  constructor(
    readonly ws: WebSocket,
    private readonly engine: LeanEngine,
  ) {}

  on(event: string, handler: Handler): void {
    (this.handlers ??= new Map()).set(event, handler);
  }

  join(room: string): void {
    if (!this.rooms.includes(room)) this.rooms.push(room);
    this.engine.joined(this, room);
  }

  emit(event: string, ...args: unknown[]): void {
    this.ws.send(`42${JSON.stringify([event, ...args])}`);
  }

  /** A Socket.IO event packet's JSON array (after "42" and any ack id). */
  deliver(event: string, args: unknown[], ackId: string): void {
    const handler = this.handlers?.get(event);
    if (!handler) return;
    if (ackId) args.push((...reply: unknown[]) => this.ws.send(`43${ackId}${JSON.stringify(reply)}`));
    handler(...args);
  }
}

export class LeanEngine {
  private readonly wss: WebSocketServer;
  private readonly sockets = new Set<LeanSocket>();
  private readonly rooms = new Map<string, Set<LeanSocket>>();
  private readonly pinger: NodeJS.Timeout;

  constructor(http: HttpServer, opts: LeanOptions, onConnection: (socket: LeanSocket) => void) {
    this.wss = new WebSocketServer({ server: http, path: '/socket.io/', perMessageDeflate: false, maxPayload: opts.maxPayload });
    const open = `0${JSON.stringify({ upgrades: [], pingInterval: opts.pingIntervalMs, pingTimeout: opts.pingIntervalMs, maxPayload: opts.maxPayload })}`;
    this.wss.on('connection', (ws) => {
      const socket = new LeanSocket(ws, this);
      this.sockets.add(socket);
      ws.send(`${open.slice(0, 2)}"sid":"${socket.id}",${open.slice(2)}`);
      ws.on('message', (data, isBinary) => this.onPacket(socket, data, isBinary, onConnection));
      ws.on('close', () => this.forget(socket));
      ws.on('error', () => ws.terminate());
    });
    this.pinger = setInterval(() => {
      for (const s of this.sockets) {
        if (!s.alive) {
          s.ws.terminate();
          continue;
        }
        s.alive = false;
        s.ws.send('2');
      }
    }, opts.pingIntervalMs);
    this.pinger.unref();
  }

  get connections(): number {
    return this.sockets.size;
  }

  to(room: string): { emit(event: string, ...args: unknown[]): void } {
    return {
      emit: (event, ...args) => {
        // Encoded once for the room, as Socket.IO's broadcast does.
        const packet = `42${JSON.stringify([event, ...args])}`;
        for (const s of this.rooms.get(room) ?? []) s.ws.send(packet);
      },
    };
  }

  joined(socket: LeanSocket, room: string): void {
    let members = this.rooms.get(room);
    if (!members) this.rooms.set(room, (members = new Set()));
    members.add(socket);
  }

  close(): void {
    clearInterval(this.pinger);
    for (const s of this.sockets) s.ws.terminate();
    this.wss.close();
  }

  private forget(socket: LeanSocket): void {
    this.sockets.delete(socket);
    for (const room of socket.rooms) {
      const members = this.rooms.get(room);
      members?.delete(socket);
      if (members?.size === 0) this.rooms.delete(room);
    }
  }

  /** Engine.IO: 3 pong, 4 message (a Socket.IO packet), 1 close; anything else closes the connection. */
  private onPacket(socket: LeanSocket, data: RawData, isBinary: boolean, onConnection: (socket: LeanSocket) => void): void {
    const text = isBinary ? '' : data.toString();
    try {
      if (text === '3') socket.alive = true;
      else if (text === '1') socket.ws.close();
      else if (text.startsWith('40') && socket.auth === undefined) {
        // CONNECT to "/" with the client's auth (none: {}).
        socket.auth = text.length > 2 ? JSON.parse(text.slice(2)) : {};
        socket.ws.send(`40${JSON.stringify({ sid: socket.id })}`);
        onConnection(socket);
      } else if (text.startsWith('42') && socket.auth !== undefined) {
        let i = 2;
        while (text.charCodeAt(i) >= 48 && text.charCodeAt(i) <= 57) i++;
        const packet = JSON.parse(text.slice(i)) as unknown[];
        if (!Array.isArray(packet) || typeof packet[0] !== 'string') throw new Error('an event packet without a name');
        socket.deliver(packet[0], packet.slice(1), text.slice(2, i));
      } else if (text.startsWith('41')) socket.ws.close();
      else throw new Error(`unexpected packet ${JSON.stringify(text.slice(0, 8))}`);
    } catch {
      socket.ws.terminate();
    }
  }
}
