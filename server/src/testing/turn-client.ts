// A minimal TURN client for tests: one Allocate over UDP (RFC 8656 §7.2), answered with the server's
// 401 challenge (REALM, NONCE) and sent again with long-term credentials: USERNAME, REALM, NONCE and
// MESSAGE-INTEGRITY (HMAC-SHA1 keyed with MD5(username:realm:password), RFC 8489 §14.5). What a
// browser's ICE agent does to gather a relay candidate, with the answer's code in the open; over UDP,
// TCP or TLS to the server (RFC 8656 §3.1).
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';

const MAGIC = 0x2112a442;
const ALLOCATE_REQUEST = 0x0003;
const ALLOCATE_SUCCESS = 0x0103;
const ATTR = { username: 0x0006, integrity: 0x0008, errorCode: 0x0009, realm: 0x0014, nonce: 0x0015, transport: 0x0019, relayed: 0x0016 };

function attribute(type: number, value: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt16BE(type, 0);
  head.writeUInt16BE(value.length, 2);
  return Buffer.concat([head, value, Buffer.alloc((4 - (value.length % 4)) % 4)]);
}

function header(type: number, bodyLength: number, transaction: Buffer): Buffer {
  const h = Buffer.alloc(20);
  h.writeUInt16BE(type, 0);
  h.writeUInt16BE(bodyLength, 2);
  h.writeUInt32BE(MAGIC, 4);
  transaction.copy(h, 8);
  return h;
}

/** An Allocate request; with credentials, signed with MESSAGE-INTEGRITY over everything before it. */
function allocate(auth?: { username: string; realm: string; nonce: Buffer; password: string }): Buffer {
  const transaction = randomBytes(12);
  const attrs = [attribute(ATTR.transport, Buffer.from([17, 0, 0, 0]))];
  if (!auth) return Buffer.concat([header(ALLOCATE_REQUEST, attrs[0].length, transaction), ...attrs]);
  attrs.push(attribute(ATTR.username, Buffer.from(auth.username)), attribute(ATTR.realm, Buffer.from(auth.realm)), attribute(ATTR.nonce, auth.nonce));
  const body = Buffer.concat(attrs);
  // The header's length counts the MESSAGE-INTEGRITY attribute (4 + 20 bytes) the HMAC is then computed without.
  const signed = Buffer.concat([header(ALLOCATE_REQUEST, body.length + 24, transaction), body]);
  const key = createHash('md5').update(`${auth.username}:${auth.realm}:${auth.password}`).digest();
  return Buffer.concat([signed, attribute(ATTR.integrity, createHmac('sha1', key).update(signed).digest())]);
}

interface Answer {
  type: number;
  attrs: Map<number, Buffer>;
}

function parse(msg: Buffer): Answer {
  if (msg.length < 20 || msg.readUInt32BE(4) !== MAGIC) throw new Error('not a STUN message');
  const attrs = new Map<number, Buffer>();
  const end = 20 + msg.readUInt16BE(2);
  for (let at = 20; at + 4 <= end;) {
    const type = msg.readUInt16BE(at);
    const length = msg.readUInt16BE(at + 2);
    attrs.set(type, msg.subarray(at + 4, at + 4 + length));
    at += 4 + length + ((4 - (length % 4)) % 4);
  }
  return { type: msg.readUInt16BE(0), attrs };
}

/** Error class and number of an error answer (401, 438...), or 0 for success. */
function codeOf(a: Answer): number {
  if (a.type === ALLOCATE_SUCCESS) return 0;
  const e = a.attrs.get(ATTR.errorCode);
  return e ? (e[2] & 7) * 100 + e[3] : -1;
}

export interface TurnAllocateOptions {
  /** How the client reaches the server (default 'udp'); the relay it asks for is UDP either way. */
  transport?: 'udp' | 'tcp' | 'tls';
  /** The server's address (default 127.0.0.1). */
  host?: string;
  /** PEM of the certificate authority a TLS client trusts (default: the system's). */
  ca?: string;
  /** UDP: resend every `retryMs` (default 500 ms) up to `attempts` times (default 120, a minute). */
  retryMs?: number;
  attempts?: number;
}

/** Sends a request and resolves with the answer of the same transaction. */
type Ask = (request: Buffer) => Promise<Answer>;

function sameTransaction(request: Buffer, msg: Buffer): boolean {
  return msg.length >= 20 && msg.subarray(8, 20).equals(request.subarray(8, 20));
}

async function udpAsker(host: string, port: number, opts: TurnAllocateOptions): Promise<{ ask: Ask; close(): void }> {
  const socket = createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, host === '127.0.0.1' ? host : undefined, r));
  const ask: Ask = (request) => new Promise<Answer>((resolve, reject) => {
    let tries = 0;
    const send = () => {
      if (tries++ >= (opts.attempts ?? 120)) return finish(new Error(`no answer from the TURN server on ${host}:${port}`));
      socket.send(request, port, host);
    };
    const timer = setInterval(send, opts.retryMs ?? 500);
    const onMessage = (msg: Buffer) => {
      if (sameTransaction(request, msg)) finish(null, parse(msg));
    };
    const finish = (e: Error | null, a?: Answer) => {
      clearInterval(timer);
      socket.off('message', onMessage);
      if (e) reject(e);
      else resolve(a!);
    };
    socket.on('message', onMessage);
    send();
  });
  return { ask, close: () => socket.close() };
}

/** Over TCP or TLS: STUN messages back to back on one stream (RFC 8489 §6.2.2), each framed by its length field. */
async function streamAsker(host: string, port: number, opts: TurnAllocateOptions): Promise<{ ask: Ask; close(): void }> {
  const socket: Socket = await new Promise((resolve, reject) => {
    const s = opts.transport === 'tls'
      ? tlsConnect({ host, port, ca: opts.ca }, () => resolve(s))
      : netConnect({ host, port }, () => resolve(s));
    s.once('error', reject);
  });
  let buffered = Buffer.alloc(0);
  const waiting: Array<{ request: Buffer; resolve(a: Answer): void; reject(e: Error): void }> = [];
  const failAll = (e: Error) => waiting.splice(0).forEach((w) => w.reject(e));
  socket.on('data', (d: Buffer) => {
    buffered = Buffer.concat([buffered, d]);
    while (buffered.length >= 20 && buffered.length >= 20 + buffered.readUInt16BE(2)) {
      const msg = buffered.subarray(0, 20 + buffered.readUInt16BE(2));
      buffered = buffered.subarray(msg.length);
      const at = waiting.findIndex((w) => sameTransaction(w.request, msg));
      if (at >= 0) waiting.splice(at, 1)[0].resolve(parse(msg));
    }
  });
  socket.on('error', failAll);
  socket.on('close', () => failAll(new Error(`the TURN server on ${host}:${port} closed the connection`)));
  const ask: Ask = (request) => new Promise<Answer>((resolve, reject) => {
    waiting.push({ request, resolve, reject });
    socket.write(request);
  });
  return { ask, close: () => socket.destroy() };
}

/**
 * Asks the TURN server at `host`:`port` for a UDP relay with these credentials, over UDP, TCP or TLS.
 * Returns 0 when the allocation succeeded (and the relayed address), else the error code of the
 * authenticated attempt. Rejects when the server cannot be reached (or, over TLS, is not trusted).
 */
export async function turnAllocate(port: number, username: string, password: string, opts: TurnAllocateOptions = {}): Promise<{ code: number; relayed: boolean }> {
  const host = opts.host ?? '127.0.0.1';
  const { ask, close } = (opts.transport ?? 'udp') === 'udp' ? await udpAsker(host, port, opts) : await streamAsker(host, port, opts);
  try {
    const challenge = await ask(allocate());
    const realm = challenge.attrs.get(ATTR.realm);
    const nonce = challenge.attrs.get(ATTR.nonce);
    if (codeOf(challenge) !== 401 || !realm || !nonce) throw new Error(`expected a 401 challenge with realm and nonce, got code ${codeOf(challenge)}`);
    const answer = await ask(allocate({ username, realm: realm.toString(), nonce, password }));
    return { code: codeOf(answer), relayed: answer.attrs.has(ATTR.relayed) };
  } finally {
    close();
  }
}
