// A stand-in for a volunteer's Socket.IO socket in runtime tests (fault injection): it keeps the
// handlers the runtime registers, delivers server events to them, acknowledges each emitWithAck as
// the test's `answer` says, and records what is sent without an ack. The runtime under test is the
// real one.
import type { Socket } from 'socket.io-client';

export interface FakeVolunteerSocket {
  socket: Socket;
  /** Delivers a server event to the runtime's handler for it. */
  deliver(name: string, payload: unknown): void;
  /** The events the runtime sent without asking for an ack, in order. */
  sent: { name: string; payload: unknown }[];
}

export function fakeVolunteerSocket(answer: (name: string, payload: unknown) => Promise<object>): FakeVolunteerSocket {
  const handlers = new Map<string, (payload: unknown) => void>();
  const sent: FakeVolunteerSocket['sent'] = [];
  const socket = {
    connected: true,
    on(name: string, fn: (payload: unknown) => void) {
      handlers.set(name, fn);
      return socket;
    },
    emit(name: string, payload: unknown) {
      sent.push({ name, payload });
      return socket;
    },
    disconnect() {
      socket.connected = false;
      return socket;
    },
    timeout() {
      return { emitWithAck: (name: string, payload: unknown) => answer(name, payload) };
    },
  };
  return { socket: socket as unknown as Socket, deliver: (name, payload) => handlers.get(name)!(payload), sent };
}
