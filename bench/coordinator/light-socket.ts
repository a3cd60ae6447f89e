// A light volunteer connection for the coordinator bench's client processes: the frames
// socket.io-client sends over a WebSocket (Engine.IO 4 open and pong, Socket.IO 5 CONNECT with the
// auth, events with and without acks, binary attachments), from the protocol's codec on `ws`, with
// none of the client's own machinery (its Manager, reconnection, buffering, emitters). The server
// sees the same bytes; the bench's 2-core machine keeps more of its CPU for the server under test.
// The real socket.io-client talks to the same endpoints in the server's tests.
import { decodePacketText, encodePacket, SOCKET_PACKET, withAttachments, type Ack, type DecodedSocketPacket } from '@tabfleet/protocol';
import WebSocket from 'ws';

// Handlers take the payloads the server sends, typed where they are registered (as socket.io-client lets them be).
type Handler = (...args: any[]) => void;

/** What client.ts uses of a socket.io-client Socket; both fit it. */
export interface BenchSocket {
  on(event: string, handler: Handler): unknown;
  emit(event: string, ...args: unknown[]): unknown;
  timeout(ms: number): { emit(event: string, payload: unknown, callback: (err: Error | null, a: Ack) => void): unknown };
  close(): unknown;
}

export interface LightSocketOptions {
  /** The server's URL (http or https). */
  url: string;
  /** The Engine.IO path, e.g. '/volunteers/'. */
  path: string;
  nsp: string;
  auth: object;
  /** connect_error('timeout') when the namespace has not answered by then. */
  connectTimeoutMs: number;
}

/**
 * The last text packet decoded in this process and what it decoded to. A round's begin and commit go
 * to every member of a job, and a job's members share a client process: one decode serves them all
 * (they only read it). Decoding the 100-member begin a hundred times was 7% of a client's time.
 */
let lastDecoded: { text: string; packet: DecodedSocketPacket } | null = null;

/** A Socket.IO packet from an Engine.IO message ('4' and the packet). */
function decodeShared(text: string): DecodedSocketPacket {
  if (lastDecoded?.text !== text) lastDecoded = { text, packet: decodePacketText(text.slice(1), 16) };
  return lastDecoded.packet;
}

export class LightSocket implements BenchSocket {
  private readonly ws: WebSocket;
  private readonly handlers = new Map<string, Handler>();
  private readonly acks = new Map<number, (...reply: unknown[]) => void>();
  private nextAck = 0;
  private joined = false;
  private gone = false;
  private pending: { packet: DecodedSocketPacket; buffers: Uint8Array[] } | null = null;
  private connectTimer: NodeJS.Timeout | null;

  constructor(private readonly o: LightSocketOptions) {
    const u = new URL(o.url);
    this.ws = new WebSocket(`${u.protocol === 'https:' ? 'wss' : 'ws'}://${u.host}${o.path}?EIO=4&transport=websocket`, { perMessageDeflate: false });
    this.ws.on('message', (data, isBinary) => this.onMessage(data as Buffer, isBinary));
    this.ws.on('close', () => this.closed('transport close'));
    this.ws.on('error', (e) => this.failed(e));
    this.connectTimer = setTimeout(() => this.failed(new Error('timeout')), o.connectTimeoutMs);
  }

  on(event: string, handler: Handler): this {
    this.handlers.set(event, handler);
    return this;
  }

  /** An event; a function as its last argument asks for an ack. */
  emit(event: string, ...args: unknown[]): this {
    let id: number | undefined;
    if (typeof args[args.length - 1] === 'function') {
      id = this.nextAck++;
      this.acks.set(id, args.pop() as (...reply: unknown[]) => void);
    }
    this.send(encodePacket(SOCKET_PACKET.event, this.o.nsp, [event, ...args], id));
    return this;
  }

  timeout(ms: number): { emit(event: string, payload: unknown, callback: (err: Error | null, a: Ack) => void): void } {
    return {
      emit: (event, payload, callback) => {
        const id = this.nextAck;
        const timer = setTimeout(() => {
          this.acks.delete(id);
          callback(new Error('operation has timed out'), undefined as never);
        }, ms);
        this.emit(event, payload, (a: Ack) => {
          clearTimeout(timer);
          callback(null, a);
        });
      },
    };
  }

  close(): void {
    this.gone = true;
    if (this.connectTimer) clearTimeout(this.connectTimer);
    this.ws.close();
  }

  private send(messages: (string | Uint8Array | ArrayBuffer)[]): void {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    for (const m of messages) this.ws.send(m);
  }

  private fire(event: string, ...args: unknown[]): void {
    (this.handlers.get(event) as ((...a: unknown[]) => void) | undefined)?.(...args);
  }

  private failed(e: Error): void {
    if (this.joined || this.gone) return;
    this.gone = true;
    if (this.connectTimer) clearTimeout(this.connectTimer);
    this.ws.terminate();
    this.fire('connect_error', e);
  }

  private closed(reason: string): void {
    if (this.connectTimer) clearTimeout(this.connectTimer);
    if (!this.joined) return this.failed(new Error('websocket error'));
    this.joined = false;
    if (!this.gone) this.fire('disconnect', reason);
    this.gone = true;
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    if (isBinary) {
      const pending = this.pending;
      if (!pending) return;
      pending.buffers.push(data);
      if (pending.buffers.length < pending.packet.attachments) return;
      this.pending = null;
      return this.packet({ ...pending.packet, data: withAttachments(pending.packet.data, pending.buffers), attachments: 0 });
    }
    const text = data.toString();
    if (text === '2') this.send(['3']);
    else if (text[0] === '0') this.send([`40${this.o.nsp},${JSON.stringify(this.o.auth)}`]);
    else if (text[0] === '4') {
      const p = decodeShared(text);
      if (p.attachments > 0) this.pending = { packet: p, buffers: [] };
      else this.packet(p);
    } else if (text === '1') this.ws.close();
  }

  private packet(p: DecodedSocketPacket): void {
    if (p.type === SOCKET_PACKET.connect) {
      this.joined = true;
      if (this.connectTimer) clearTimeout(this.connectTimer);
      this.connectTimer = null;
      this.fire('connect');
    } else if (p.type === SOCKET_PACKET.connectError) {
      const body = p.data as { message?: string; data?: unknown };
      this.failed(Object.assign(new Error(body?.message ?? 'connect_error'), { data: body?.data }));
    } else if (p.type === SOCKET_PACKET.event || p.type === SOCKET_PACKET.binaryEvent) {
      const [event, ...args] = p.data as [string, ...unknown[]];
      this.fire(event, ...args);
    } else if (p.type === SOCKET_PACKET.ack || p.type === SOCKET_PACKET.binaryAck) {
      const ack = p.id === null ? undefined : this.acks.get(p.id);
      if (ack && p.id !== null) {
        this.acks.delete(p.id);
        ack(...(p.data as unknown[]));
      }
    } else if (p.type === SOCKET_PACKET.disconnect) {
      this.closed('io server disconnect');
      this.ws.close();
    }
  }
}
