// What the volunteer namespace and the event guard use of a connection and of the endpoint that
// accepts them: Socket.IO's namespace and sockets fit it as they are, and so does the lean volunteer
// endpoint (lean-volunteers.ts), so one set of handlers serves both.

/** One volunteer's connection to this node. */
export interface VolunteerConnection {
  readonly id: string;
  /** What the namespace's handshake kept of it (its VolunteerData). */
  data: unknown;
  readonly handshake: { auth: unknown; address: string };
  readonly conn: { readonly readyState: string };
  emit(event: string, ...args: unknown[]): unknown;
  /** Ends the connection from the server's side. */
  disconnect(close?: boolean): unknown;
  /** Every event the client sends, its ack function last when it asked for one. */
  onAny(listener: (event: unknown, ...args: unknown[]) => void): unknown;
  /**
   * While an event from a text packet with no binary attachments is being dispatched, that packet's
   * length in UTF-8 bytes (0 otherwise, or absent where the transport does not say): the guard's
   * cheap bound on the event's size (`withinLimitByPacketSize` in guard.ts).
   */
  readonly textPacketBytes?: number;
  join(room: string): unknown;
  /** Called once, with the connection as `this`. */
  on(event: 'disconnect', listener: (reason: string) => void): unknown;
}

export type Middleware = (socket: VolunteerConnection, next: (err?: Error) => void) => void;

/** Where volunteers connect: Socket.IO's /volunteer namespace, or the lean endpoint. */
export interface VolunteerEndpoint {
  use(middleware: Middleware): void;
  onConnection(listener: (socket: VolunteerConnection) => void): void;
  readonly size: number;
  connections(): Iterable<VolunteerConnection>;
}
