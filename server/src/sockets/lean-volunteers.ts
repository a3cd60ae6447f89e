// The lean volunteer endpoint: Socket.IO's wire protocol (Engine.IO v4, Socket.IO v5) for the
// /volunteer namespace on the `ws` package alone, at its own path (VOLUNTEER_SOCKET_PATH), WebSocket
// only. A Socket.IO connection keeps an engine socket, a client, a namespace socket, their timers and
// listeners (about 11 KiB of heap each, bench/coordinator floor); this keeps one object and its
// WebSocket, and one timer pings them all, a slice per tick (ping-wheel.ts). The real
// socket.io-client speaks to it unchanged, given the path and `transports: ['websocket']`. Every
// connection passes the same edge as Socket.IO's (Host, Origin, the per-address bucket and cap, a
// token per namespace handshake, the join grace, the text and attachment bounds) and the same
// namespace middlewares and event guard.
import {
  decodePacketText, encodePacket, LIMITS, NAMESPACES, SOCKET_PACKET, SocketWireError, VOLUNTEER_SOCKET_PATH, withAttachments, type Clock, type DecodedSocketPacket,
} from '@tabfleet/protocol';
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, Server as HttpServer } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import type { Middleware, VolunteerConnection, VolunteerEndpoint } from './connection';
import { MAX_TEXT_MESSAGE, type SocketEdge } from './edge';
import { PingWheel } from './ping-wheel';

export interface LeanVolunteerOptions {
  edge: SocketEdge;
  /** How long a connection may go without joining /volunteer (the edge's join grace). */
  joinGraceMs: number;
  pingIntervalMs: number;
  /** How long past a due ping the client waits before it closes the connection (announced in the open packet). */
  pingTimeoutMs: number;
  /** Pings a connection may leave unanswered before it is closed (the next tick closes it). */
  pingsUnanswered?: number;
  /** The pings' timers (serverClock unless a test fakes time). */
  clock?: Clock;
  log(m: string): void;
}

/** A WebSocket message as bytes, with whether it goes as text (a packet) or binary (an attachment). */
interface Frame {
  data: Uint8Array | ArrayBuffer;
  options: { binary: boolean };
}
const TEXT = Object.freeze({ binary: false });
const BINARY = Object.freeze({ binary: true });

/**
 * A packet's messages as bytes: a text message sent to a hundred members was turned into UTF-8 once per
 * member by `ws` (and measured once more for its frame header).
 */
function toFrames(messages: (string | Uint8Array | ArrayBuffer)[]): Frame[] {
  return messages.map((m) => (typeof m === 'string' ? { data: Buffer.from(m), options: TEXT } : { data: m, options: BINARY }));
}

/** One volunteer's connection: what VolunteerConnection asks of a socket, and its wire state. */
export class LeanVolunteer implements VolunteerConnection {
  readonly id = randomBytes(12).toString('base64url');
  data: unknown = undefined;
  readonly handshake: { auth: unknown; address: string };
  /** Joined /volunteer (its middlewares passed), and not gone since. */
  connected = false;
  /** A CONNECT is being handled: a second one closes the connection. */
  connecting = false;
  unanswered = 0;
  joinTimer: NodeJS.Timeout | null = null;
  /** A binary event waiting for its attachments. */
  pending: { packet: DecodedSocketPacket; buffers: Uint8Array[] } | null = null;
  anyListener: ((event: unknown, ...args: unknown[]) => void) | null = null;
  textPacketBytes = 0;
  disconnectListener: ((reason: string) => void) | null = null;
  rooms: string[] | null = null;
  closeReason = 'transport close';

  constructor(
    readonly ws: WebSocket,
    address: string,
    private readonly endpoint: LeanVolunteers,
  ) {
    this.handshake = { auth: undefined, address };
  }

  get conn(): { readyState: string } {
    return { readyState: this.ws.readyState === this.ws.OPEN ? 'open' : 'closed' };
  }

  emit(event: string, ...args: unknown[]): boolean {
    this.send(encodePacket(SOCKET_PACKET.event, NAMESPACES.volunteer, [event, ...args]));
    return true;
  }

  send(messages: (string | Uint8Array | ArrayBuffer)[]): void {
    if (this.ws.readyState !== this.ws.OPEN) return;
    for (const m of messages) this.ws.send(m);
  }

  /** Frames encoded once for many connections (`toFrames`). */
  sendFrames(frames: readonly Frame[]): void {
    if (this.ws.readyState !== this.ws.OPEN) return;
    for (const f of frames) this.ws.send(f.data, f.options);
  }

  disconnect(): this {
    if (this.connected) this.send(encodePacket(SOCKET_PACKET.disconnect, NAMESPACES.volunteer));
    this.closeReason = 'server namespace disconnect';
    this.ws.close();
    return this;
  }

  onAny(listener: (event: unknown, ...args: unknown[]) => void): this {
    this.anyListener = listener;
    return this;
  }

  on(event: 'disconnect', listener: (reason: string) => void): this {
    if (event === 'disconnect') this.disconnectListener = listener;
    return this;
  }

  join(room: string): this {
    this.endpoint.joined(this, room);
    return this;
  }
}

export class LeanVolunteers implements VolunteerEndpoint {
  private readonly wss: WebSocketServer;
  private readonly sockets = new Set<LeanVolunteer>();
  private readonly rooms = new Map<string, LeanVolunteer | Set<LeanVolunteer>>();
  private readonly middlewares: Middleware[] = [];
  private readonly connectionListeners: ((socket: VolunteerConnection) => void)[] = [];
  private readonly pinger: PingWheel<LeanVolunteer>;
  private readonly open: string;
  private readonly onUpgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
  private joinedCount = 0;

  constructor(
    private readonly http: HttpServer,
    private readonly opts: LeanVolunteerOptions,
  ) {
    // No clientTracking: `sockets` already holds every connection (close() terminates them), and ws's
    // own set would add an entry and a close listener to each.
    this.wss = new WebSocketServer({ noServer: true, clientTracking: false, perMessageDeflate: false, maxPayload: LIMITS.maxSocketMessageBytes });
    // The client closes a connection that heard no ping for pingInterval + pingTimeout, as on Socket.IO's
    // path; this side closes one that left `pingsUnanswered` pings unanswered.
    this.open = JSON.stringify({ upgrades: [], pingInterval: opts.pingIntervalMs, pingTimeout: opts.pingTimeoutMs, maxPayload: LIMITS.maxSocketMessageBytes });
    this.onUpgrade = (req, socket, head) => this.upgrade(req, socket, head);
    // Before engine.io's own listener: an upgrade it does not serve it would destroy after a second
    // unless something has answered it by then.
    http.prependListener('upgrade', this.onUpgrade);
    const pingsUnanswered = opts.pingsUnanswered ?? 2;
    this.pinger = new PingWheel<LeanVolunteer>(opts.pingIntervalMs, (s) => {
      if (s.unanswered >= pingsUnanswered) {
        s.closeReason = 'ping timeout';
        s.ws.terminate();
        return;
      }
      s.unanswered++;
      s.send(['2']);
    }, opts.clock);
  }

  /** Volunteers joined here. */
  get size(): number {
    return this.joinedCount;
  }

  *connections(): Iterable<VolunteerConnection> {
    for (const s of this.sockets) if (s.connected) yield s;
  }

  use(middleware: Middleware): void {
    this.middlewares.push(middleware);
  }

  onConnection(listener: (socket: VolunteerConnection) => void): void {
    this.connectionListeners.push(listener);
  }

  /** The event to the connections here in `rooms`, encoded once; returns the rooms none of them is in. */
  emitTo(rooms: readonly string[], event: string, args: unknown[]): string[] {
    let frames: Frame[] | null = null;
    const notHere: string[] = [];
    for (const room of rooms) {
      const members = this.rooms.get(room);
      if (!members) {
        notHere.push(room);
        continue;
      }
      frames ??= toFrames(encodePacket(SOCKET_PACKET.event, NAMESPACES.volunteer, [event, ...args]));
      if (members instanceof LeanVolunteer) members.sendFrames(frames);
      else for (const s of members) s.sendFrames(frames);
    }
    return notHere;
  }

  joined(socket: LeanVolunteer, room: string): void {
    if (!socket.connected || socket.rooms?.includes(room)) return;
    // A new array of the exact length: pushing onto [] reserves 17 slots (about 150 bytes a connection).
    socket.rooms = socket.rooms ? [...socket.rooms, room] : [room];
    // A volunteer's own room holds one connection: kept bare, without a Set.
    const members = this.rooms.get(room);
    if (!members) this.rooms.set(room, socket);
    else if (members instanceof LeanVolunteer) this.rooms.set(room, new Set([members, socket]));
    else members.add(socket);
  }

  close(): void {
    this.http.off('upgrade', this.onUpgrade);
    this.pinger.stop();
    for (const s of this.sockets) s.ws.terminate();
    this.wss.close();
  }

  private upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname !== VOLUNTEER_SOCKET_PATH && `${url.pathname}/` !== VOLUNTEER_SOCKET_PATH) return;
    const refuse = (status: number, code: string, message: string) => {
      const body = JSON.stringify({ code, message });
      const head = [`HTTP/1.1 ${status} ${status === 429 ? 'Too Many Requests' : 'Bad Request'}`, 'Connection: close', 'Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`];
      socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
    };
    if (url.searchParams.get('EIO') !== '4' || url.searchParams.get('transport') !== 'websocket') {
      return refuse(400, 'bad_request', `this path speaks Engine.IO 4 over WebSocket only (connect with transports: ['websocket'])`);
    }
    const admitted = this.opts.edge.admit(req);
    if ('code' in admitted) return refuse(admitted.code === 'rate_limited' ? 429 : 400, admitted.code, admitted.message);
    this.wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws, admitted.address));
  }

  private accept(ws: WebSocket, address: string): void {
    const socket = new LeanVolunteer(ws, address, this);
    ws.on('close', () => this.closed(socket));
    ws.on('error', () => ws.terminate());
    if (!this.opts.edge.hold(address)) {
      ws.close();
      return;
    }
    this.sockets.add(socket);
    this.pinger.add(socket);
    ws.on('message', (data, isBinary) => this.message(socket, data, isBinary));
    socket.send([`0${this.open.slice(0, 1)}"sid":"${socket.id}",${this.open.slice(1)}`]);
    this.awaitJoin(socket);
  }

  /** Closes the connection unless it joins /volunteer within the grace. */
  private awaitJoin(socket: LeanVolunteer): void {
    socket.joinTimer = setTimeout(() => {
      if (!socket.connected) socket.ws.close();
    }, this.opts.joinGraceMs);
    socket.joinTimer.unref();
  }

  private closed(socket: LeanVolunteer): void {
    if (socket.joinTimer) clearTimeout(socket.joinTimer);
    if (!this.sockets.delete(socket)) return;
    this.pinger.delete(socket);
    this.opts.edge.release(socket.handshake.address);
    for (const room of socket.rooms ?? []) {
      const members = this.rooms.get(room);
      if (members === socket) this.rooms.delete(room);
      else if (members instanceof Set) {
        members.delete(socket);
        if (members.size === 1) this.rooms.set(room, [...members][0]);
      }
    }
    if (!socket.connected) return;
    socket.connected = false;
    this.joinedCount--;
    const listener = socket.disconnectListener;
    if (listener) {
      try {
        listener.call(socket, socket.closeReason);
      } catch (e) {
        this.opts.log(`volunteer ${socket.id}: disconnect handler failed: ${(e as Error).stack}`);
      }
    }
  }

  /** Engine.IO: 3 pong, 4 a Socket.IO packet, 1 close; binary: an attachment of the packet before. Anything else closes the connection. */
  private message(socket: LeanVolunteer, data: RawData, isBinary: boolean): void {
    try {
      if (isBinary) return this.attachment(socket, data as Buffer);
      // Checked on the bytes before decoding (a character takes at most 4), then on the characters.
      if ((data as Buffer).length > 4 * (MAX_TEXT_MESSAGE + 1)) throw new SocketWireError(`a text message of ${(data as Buffer).length} bytes (no event is over ${MAX_TEXT_MESSAGE} characters)`);
      const text = data.toString();
      if (text.length > MAX_TEXT_MESSAGE + 1) throw new SocketWireError(`a text message of ${text.length} characters (no event is over ${MAX_TEXT_MESSAGE})`);
      if (socket.pending) throw new SocketWireError('a text message while a binary packet waits for its attachments');
      if (text === '3') socket.unanswered = 0;
      else if (text === '1') socket.ws.close();
      else if (text[0] === '4') {
        socket.textPacketBytes = (data as Buffer).length;
        try {
          this.packet(socket, decodePacketText(text.slice(1), 1));
        } finally {
          socket.textPacketBytes = 0;
        }
      }
      else throw new SocketWireError(`unexpected Engine.IO packet ${JSON.stringify(text.slice(0, 8))}`);
    } catch (e) {
      this.opts.log(`volunteer connection ${socket.id} closed: ${(e as Error).message}`);
      socket.ws.terminate();
    }
  }

  private attachment(socket: LeanVolunteer, data: Buffer): void {
    const pending = socket.pending;
    if (!pending) throw new SocketWireError('a binary message no packet announced');
    pending.buffers.push(data);
    if (pending.buffers.length < pending.packet.attachments) return;
    socket.pending = null;
    this.packet(socket, { ...pending.packet, data: withAttachments(pending.packet.data, pending.buffers), attachments: 0 });
  }

  private packet(socket: LeanVolunteer, p: DecodedSocketPacket): void {
    if (p.attachments > 0) {
      socket.pending = { packet: p, buffers: [] };
      return;
    }
    if (p.type === SOCKET_PACKET.connect) return this.connect(socket, p);
    if (p.nsp !== NAMESPACES.volunteer || !socket.connected) {
      if (p.type === SOCKET_PACKET.event || p.type === SOCKET_PACKET.binaryEvent) throw new SocketWireError(`an event on ${JSON.stringify(p.nsp.slice(0, 40))}, which this connection has not joined`);
      return;
    }
    if (p.type === SOCKET_PACKET.disconnect) {
      socket.closeReason = 'client namespace disconnect';
      socket.ws.close();
    } else if (p.type === SOCKET_PACKET.event || p.type === SOCKET_PACKET.binaryEvent) {
      if (!Array.isArray(p.data) || p.data.length === 0) throw new SocketWireError('an event packet that is not an array');
      const args = p.data.slice(1);
      if (p.id !== null) {
        const id = p.id;
        args.push((...reply: unknown[]) => socket.send(encodePacket(SOCKET_PACKET.ack, NAMESPACES.volunteer, reply, id)));
      }
      socket.anyListener?.(p.data[0], ...args);
    }
    // Acks from the client answer nothing: this server asks volunteers for none.
  }

  private connect(socket: LeanVolunteer, p: DecodedSocketPacket): void {
    const refuse = (e: Error) => {
      const data = (e as Error & { data?: unknown }).data;
      socket.send(encodePacket(SOCKET_PACKET.connectError, p.nsp, { message: e.message, ...(data === undefined ? {} : { data }) }));
    };
    if (p.nsp !== NAMESPACES.volunteer) return refuse(Object.assign(new Error(`no such namespace on this path: connect to ${NAMESPACES.volunteer}`), { data: { code: 'unknown_event' } }));
    if (socket.connected || socket.connecting) throw new SocketWireError('a second CONNECT on one connection');
    socket.connecting = true;
    socket.handshake.auth = p.data && typeof p.data === 'object' ? p.data : {};
    const steps = this.middlewares;
    const run = (i: number, err?: Error): void => {
      if (err || socket.ws.readyState !== socket.ws.OPEN) {
        socket.connecting = false;
        if (err) refuse(err);
        return;
      }
      if (i < steps.length) return steps[i](socket, (e) => run(i + 1, e));
      socket.connecting = false;
      socket.connected = true;
      this.joinedCount++;
      if (socket.joinTimer) clearTimeout(socket.joinTimer);
      socket.joinTimer = null;
      socket.send(encodePacket(SOCKET_PACKET.connect, NAMESPACES.volunteer, { sid: socket.id }));
      for (const listener of this.connectionListeners) listener(socket);
    };
    const edgeRefusal = this.opts.edge.namespaceHandshake(socket.handshake.address);
    run(0, edgeRefusal ?? undefined);
  }
}

