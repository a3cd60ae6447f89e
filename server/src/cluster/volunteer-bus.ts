// Events for volunteers connected to other nodes, over one Redis channel: a coordinator's emit to
// members elsewhere is published once, and every other node delivers it to those of the named
// volunteers' rooms it holds, on either endpoint (Socket.IO's or the lean one). One message: a
// 4-byte length, a JSON header (the sending node, the rooms, the event, its arguments with each binary
// replaced by a placeholder, the binaries' lengths) and the binaries after it.
import { placeholders, withAttachments } from '@tabfleet/protocol';

export interface VolunteerDelivery {
  rooms: string[];
  event: string;
  args: unknown[];
}

interface Header extends Omit<VolunteerDelivery, 'args'> {
  from: string;
  args: unknown;
  lengths: number[];
}

/** What the bus needs of a Redis connection pair (node-redis v4 clients, buffers in and out). */
export interface BusClients {
  publish(channel: string, message: Buffer): Promise<unknown>;
  subscribe(channel: string, listener: (message: Buffer) => void, bufferMode: true): Promise<unknown>;
}

export const VOLUNTEER_BUS_CHANNEL = 'tf:to-volunteers';

export function encodeDelivery(from: string, d: VolunteerDelivery): Buffer {
  const found: (Uint8Array | ArrayBuffer)[] = [];
  const args = placeholders(d.args, found);
  const binaries = found.map((b) => (b instanceof ArrayBuffer ? new Uint8Array(b) : b));
  const header: Header = { from, rooms: d.rooms, event: d.event, args, lengths: binaries.map((b) => b.byteLength) };
  const head = Buffer.from(JSON.stringify(header));
  const size = Buffer.alloc(4);
  size.writeUInt32BE(head.length);
  return Buffer.concat([size, head, ...binaries]);
}

export function decodeDelivery(message: Buffer): VolunteerDelivery & { from: string } {
  const headLength = message.readUInt32BE(0);
  const header = JSON.parse(message.subarray(4, 4 + headLength).toString()) as Header;
  const binaries: Uint8Array[] = [];
  let at = 4 + headLength;
  for (const length of header.lengths) {
    binaries.push(message.subarray(at, at + length));
    at += length;
  }
  return { from: header.from, rooms: header.rooms, event: header.event, args: withAttachments(header.args, binaries) as unknown[] };
}

export class VolunteerBus {
  constructor(
    private readonly nodeId: string,
    private readonly pub: BusClients,
    private readonly sub: BusClients,
  ) {}

  /** Delivers what other nodes publish (never this node's own) to `deliver`. */
  async listen(deliver: (d: VolunteerDelivery) => void): Promise<void> {
    await this.sub.subscribe(VOLUNTEER_BUS_CHANNEL, (message) => {
      const d = decodeDelivery(message);
      if (d.from !== this.nodeId) deliver(d);
    }, true);
  }

  publish(d: VolunteerDelivery): void {
    this.pub.publish(VOLUNTEER_BUS_CHANNEL, encodeDelivery(this.nodeId, d)).catch((e) => console.error(`[redis] volunteer bus: ${(e as Error).message}`));
  }
}
