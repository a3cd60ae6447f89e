// How many bytes an event's argument carries, found by walking it, never by serializing it: JSON text
// counted exactly as JSON.stringify would write it, binary (Buffer, typed arrays, DataView,
// ArrayBuffer) at any depth by its byteLength. The walk stops as soon as a budget is passed, so its
// cost is bounded by the budget, not by what was sent: a 32 MiB Buffer is one byteLength read.
// (Stringifying one writes a number per byte: 32 MiB nested in an event blocked the server for 4 s.)

/** Binary as Socket.IO delivers it (a Buffer in Node, an ArrayBuffer in browsers), or any view of bytes. */
export type Binary = ArrayBufferView | ArrayBuffer;

/** %TypedArray%, the prototype of every typed array class. */
const TypedArray = Object.getPrototypeOf(Uint8Array) as abstract new () => ArrayBufferView;

export function isBinary(v: unknown): v is Binary {
  // `instanceof` too, as the event schemas test (`binaryAttachmentSchema`): whatever passes for binary is measured as binary.
  return ArrayBuffer.isView(v) || v instanceof TypedArray || v instanceof DataView || v instanceof ArrayBuffer
    || (typeof SharedArrayBuffer !== 'undefined' && v instanceof SharedArrayBuffer);
}

/**
 * What one event may carry: `bytes` of JSON text and binary in all, besides at most one attachment,
 * a binary value in the top-level field `attachment.field` of at most `attachment.bytes`.
 */
export interface SizeLimit {
  bytes: number;
  attachment?: { field: string; bytes: number };
  /** No binary at all outside the attachment (signaling data is JSON). */
  jsonOnly?: boolean;
}

export interface WireSize {
  /** Characters of JSON text (each binary value written as `null`), as far as the walk went. */
  json: number;
  /** Bytes of binary outside the attachment. */
  binary: number;
  /** Bytes of the attachment (0 when there is none). */
  attachment: number;
  /** A budget was passed (the counts stop there), or the value is no JSON with binary: a cycle, a bigint, a toJSON method. */
  over: boolean;
}

const OVER = Symbol('over');
/** Characters JSON.stringify escapes (a lone surrogate too); strings without them are written as they are, in quotes. */
const NEEDS_ESCAPE = /[\u0000-\u001f"\\\ud800-\udfff]/;
const skipped = (v: unknown) => v === undefined || typeof v === 'function' || typeof v === 'symbol';

function byteLengthOf(b: Binary): number {
  const n = b.byteLength;
  if (!(Number.isSafeInteger(n) && n >= 0)) throw OVER;
  return n;
}

/** The walk's state: the counts so far, the limit, objects seen (a cycle or shared reference is refused), values still to visit. */
interface Walk {
  size: WireSize;
  limit: SizeLimit;
  seen: Set<object>;
  todo: unknown[];
}

function addJson(w: Walk, n: number): void {
  w.size.json += n;
  if (w.size.json + w.size.binary > w.limit.bytes) throw OVER;
}

function addString(w: Walk, s: string): void {
  // Escaping only lengthens a string: one already too long is not looked at.
  if (s.length + 2 > w.limit.bytes - w.size.json - w.size.binary) throw OVER;
  addJson(w, NEEDS_ESCAPE.test(s) ? JSON.stringify(s).length : s.length + 2);
}

function visit(w: Walk, x: unknown, top: boolean): void {
  if (x === null || x === undefined || typeof x === 'function' || typeof x === 'symbol') return addJson(w, top && x !== null ? 0 : 4);
  if (typeof x === 'boolean') return addJson(w, x ? 4 : 5);
  if (typeof x === 'number') return addJson(w, Number.isFinite(x) ? String(x).length : 4);
  if (typeof x === 'string') return addString(w, x);
  if (typeof x !== 'object') throw OVER; // bigint: JSON.stringify throws
  if (isBinary(x)) {
    if (w.limit.jsonOnly) throw OVER;
    w.size.binary += byteLengthOf(x);
    return addJson(w, 4);
  }
  if (w.seen.has(x)) throw OVER;
  w.seen.add(x);
  if (Array.isArray(x)) {
    addJson(w, 2 + Math.max(0, x.length - 1));
    for (let i = x.length - 1; i >= 0; i--) w.todo.push(x[i]);
    return;
  }
  if (typeof (x as { toJSON?: unknown }).toJSON === 'function') throw OVER;
  addJson(w, 2);
  const field = top ? w.limit.attachment?.field : undefined;
  let entries = 0;
  for (const k of Object.keys(x)) {
    const v = (x as Record<string, unknown>)[k];
    if (skipped(v)) continue;
    if (entries++) addJson(w, 1);
    addString(w, k);
    addJson(w, 1);
    if (k === field && isBinary(v)) {
      w.size.attachment = byteLengthOf(v);
      if (w.size.attachment > w.limit.attachment!.bytes) throw OVER;
      addJson(w, 4);
    } else w.todo.push(v);
  }
}

/**
 * Measures `value` against `limit` without serializing it. Never throws: anything the walk cannot
 * measure (a throwing getter, a cycle, a bigint, an object with a toJSON method) is `over`. An object
 * reached twice is refused as a cycle would be: JSON text cannot express a shared reference.
 * (Module-level helpers over one state object, not closures made per call: every inbound event is
 * measured, and under tsx each closure made also names itself.)
 */
export function measureWire(value: unknown, limit: SizeLimit): WireSize {
  const w: Walk = { size: { json: 0, binary: 0, attachment: 0, over: false }, limit, seen: new Set(), todo: [] };
  try {
    visit(w, value, true);
    while (w.todo.length) visit(w, w.todo.pop(), false);
  } catch {
    w.size.over = true;
  }
  return w.size;
}
