// Socket.IO v5 packets over Engine.IO v4 on a WebSocket, as the server's lean volunteer endpoint
// (server/src/sockets/lean-volunteers.ts) and the coordinator bench's light clients speak them: the text header (type, attachment count, namespace, ack id, JSON) and binary
// attachments, each sent as a WebSocket binary message after the text that names it with a
// placeholder. What socket.io-parser does, for the packets a volunteer connection uses and no more.

/** Socket.IO packet types. */
export const SOCKET_PACKET = { connect: 0, disconnect: 1, event: 2, ack: 3, connectError: 4, binaryEvent: 5, binaryAck: 6 } as const;

export interface DecodedSocketPacket {
  type: number;
  nsp: string;
  /** The ack id the client asked for (events), or answers (acks). */
  id: number | null;
  data: unknown;
  /** Binary messages still to come before `data` is whole (binary events and acks). */
  attachments: number;
}

/** Thrown for a text that is not a Socket.IO packet a volunteer sends: the connection is closed. */
export class SocketWireError extends Error {}

/** One Socket.IO packet's text (without Engine.IO's "4" message prefix), its binary parts still placeholders. */
export function decodePacketText(text: string, maxAttachments: number): DecodedSocketPacket {
  let i = 0;
  const type = text.charCodeAt(i++) - 48;
  if (!(type >= 0 && type <= 6)) throw new SocketWireError(`unknown packet type ${JSON.stringify(text.slice(0, 1))}`);
  let attachments = 0;
  if (type === SOCKET_PACKET.binaryEvent || type === SOCKET_PACKET.binaryAck) {
    const dash = text.indexOf('-', i);
    const count = text.slice(i, dash);
    if (dash < 0 || !/^\d{1,3}$/.test(count)) throw new SocketWireError('a binary packet without its attachment count');
    attachments = Number(count);
    if (attachments > maxAttachments) throw new SocketWireError(`a packet with ${attachments} binary attachments (at most ${maxAttachments})`);
    i = dash + 1;
  }
  let nsp = '/';
  if (text[i] === '/') {
    const comma = text.indexOf(',', i);
    nsp = comma < 0 ? text.slice(i) : text.slice(i, comma);
    i = comma < 0 ? text.length : comma + 1;
  }
  let digits = i;
  while (digits < text.length && digits - i < 16 && text.charCodeAt(digits) >= 48 && text.charCodeAt(digits) <= 57) digits++;
  const id = digits > i ? Number(text.slice(i, digits)) : null;
  const rest = text.slice(digits);
  let data: unknown;
  try {
    data = rest ? JSON.parse(rest) : undefined;
  } catch {
    throw new SocketWireError('a packet whose payload is not JSON');
  }
  return { type, nsp, id, data, attachments };
}

/** Replaces the placeholders in `data` with the binary messages that followed its text. */
export function withAttachments(data: unknown, buffers: readonly Uint8Array[]): unknown {
  if (Array.isArray(data)) return data.map((x) => withAttachments(x, buffers));
  if (!data || typeof data !== 'object') return data;
  const o = data as Record<string, unknown>;
  if (o._placeholder === true && typeof o.num === 'number') {
    const buffer = buffers[o.num];
    if (!buffer) throw new SocketWireError(`a placeholder for attachment ${o.num} of ${buffers.length}`);
    return buffer;
  }
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(o)) out[key] = withAttachments(o[key], buffers);
  return out;
}

function isBinary(x: unknown): x is Uint8Array | ArrayBuffer {
  return x instanceof Uint8Array || x instanceof ArrayBuffer;
}

function hasBinary(x: unknown, depth = 0): boolean {
  if (isBinary(x)) return true;
  if (!x || typeof x !== 'object' || depth > 32) return false;
  if (Array.isArray(x)) return x.some((v) => hasBinary(v, depth + 1));
  return Object.values(x).some((v) => hasBinary(v, depth + 1));
}

/** `x` with each binary in it replaced by a placeholder numbering its place in `buffers` (where it is pushed). */
export function placeholders(x: unknown, buffers: (Uint8Array | ArrayBuffer)[]): unknown {
  if (isBinary(x)) {
    buffers.push(x);
    return { _placeholder: true, num: buffers.length - 1 };
  }
  if (!x || typeof x !== 'object') return x;
  if (Array.isArray(x)) return x.map((v) => placeholders(v, buffers));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(x)) out[k] = placeholders(v, buffers);
  return out;
}

/**
 * The WebSocket messages of one packet from the server: Engine.IO's "4" and the Socket.IO text, then
 * each binary attachment as a message of its own.
 */
type ServerPacketType = typeof SOCKET_PACKET.event | typeof SOCKET_PACKET.ack | typeof SOCKET_PACKET.connect | typeof SOCKET_PACKET.connectError | typeof SOCKET_PACKET.disconnect;

export function encodePacket(type: ServerPacketType, nsp: string, data?: unknown, id?: number): (string | Uint8Array | ArrayBuffer)[] {
  const buffers: (Uint8Array | ArrayBuffer)[] = [];
  let wireType: number = type;
  let payload = data;
  if ((type === SOCKET_PACKET.event || type === SOCKET_PACKET.ack) && hasBinary(data)) {
    payload = placeholders(data, buffers);
    wireType = type === SOCKET_PACKET.event ? SOCKET_PACKET.binaryEvent : SOCKET_PACKET.binaryAck;
  }
  const head = `4${wireType}${buffers.length ? `${buffers.length}-` : ''}${nsp === '/' ? '' : `${nsp},`}${id ?? ''}`;
  return [payload === undefined ? head : head + JSON.stringify(payload), ...buffers];
}
