// The /volunteer namespace: anonymous tabs connect with their protocol version and capabilities, ask
// for work, and from then on every event they send is routed to their job's coordinator.
import { randomBytes } from 'node:crypto';
import {
  NAMESPACES,
  PROTOCOL_VERSION,
  ProtocolError,
  serverClock,
  VOLUNTEER_EVENTS,
  volunteerAuthSchema,
  type Capabilities,
  type Clock,
  type VolunteerEventName,
  type VolunteerEventParsed,
} from '@tabfleet/protocol';
import type { Namespace } from 'socket.io';
import type { JobHub } from '../cluster/hub';
import { AddressRateLimiter, type HttpRateLimit } from '../http/security';
import type { Store } from '../store/store';
import type { VolunteerConnection as Socket, VolunteerEndpoint } from './connection';
import { guardSocket, type Handler } from './guard';
import { HeartbeatPeriod } from './heartbeat-period';
import { SpreadEmit } from './spread-emit';
import type { Count } from '../metrics-catalogue';

interface VolunteerData {
  volunteerId: string;
  capabilities: Capabilities;
  clientId: string | undefined;
  displayName: string | null;
  address: string;
  jobId: string | null;
  /** Asked for work and got none yet: offered the next job that opens. */
  waitingForWork: boolean;
  requestedJob: string | undefined;
  /**
   * An assignment on its way. With several nodes, the owner's `model:load` travels through the
   * Redis adapter and can reach the volunteer, and its `model:loaded` come back, before the owner's
   * answer to the join does; the volunteer's job events wait for it instead of being refused.
   */
  assigning: Promise<unknown> | null;
  /** Holds one of its address's volunteer connections (released once: refused, disconnected, or its connection closed mid-handshake). */
  counted: boolean;
}

/** What a volunteer socket's handshake keeps of its auth once parsed (the parsed copy is in its data). */
const PARSED_AUTH = Object.freeze({});

/** How often idle volunteers are offered to jobs that gained room. */
const IDLE_OFFER_INTERVAL_MS = 2_000;

export function volunteerRoom(volunteerId: string): string {
  return `v:${volunteerId}`;
}

/** An Error carrying a code, the way Socket.IO reports a refused handshake to the client. */
function handshakeError(code: string, message: string): Error {
  return Object.assign(new Error(message), { data: { code } });
}

/**
 * Display names one address may set or change (a name it sets again unchanged is free): a burst of
 * 32, one address's worth of tabs naming themselves at once, then one a minute. The store bounds
 * the names of ids without work (MAX_UNPROVEN_NAMES); this keeps one address from cycling them all.
 */
export const DEFAULT_NAME_WRITES: HttpRateLimit = { perSecond: 1 / 60, burst: 32 };

export interface VolunteerNamespaceOptions {
  /** Volunteer connections one address may hold on this node at once. */
  maxConnectionsPerAddress: number;
  /** Display-name writes per address (default DEFAULT_NAME_WRITES). */
  nameWrites?: HttpRateLimit;
  count: Count;
  log(m: string): void;
  /** Heartbeats a second this node budgets for its volunteers (default HEARTBEATS_PER_SEC), and the clock that times their announcement. */
  heartbeatsPerSec?: number;
  clock?: Clock;
}

/** Socket.IO's /volunteer namespace as a VolunteerEndpoint. */
export function socketIoEndpoint(nsp: Namespace): VolunteerEndpoint {
  return {
    use: (middleware) => nsp.use(middleware),
    onConnection: (listener) => nsp.on('connection', listener),
    get size() {
      return nsp.sockets.size;
    },
    connections: () => nsp.sockets.values(),
  };
}

/** The /volunteer namespace's handshake and handlers on every endpoint volunteers connect to (Socket.IO's, the lean one). */
export function attachVolunteerNamespace(endpoints: readonly VolunteerEndpoint[], hub: JobHub, store: Store, opts: VolunteerNamespaceOptions): { close(): void } {
  const connections = function* () {
    for (const endpoint of endpoints) yield* endpoint.connections();
  };
  const clock = opts.clock ?? serverClock;
  const announcement = new SpreadEmit(clock);
  const heartbeat = new HeartbeatPeriod({
    volunteers: () => endpoints.reduce((n, e) => n + e.size, 0),
    announce: (ms) => announcement.start(connections(), 'heartbeat', { ms }),
    clock, perSecond: opts.heartbeatsPerSec,
  });
  const connectionsByAddress = new Map<string, number>();
  const nameWrites = new AddressRateLimiter(opts.nameWrites ?? DEFAULT_NAME_WRITES);
  const nameWriteRefused = (address: string) => {
    const waitMs = nameWrites.take(address);
    if (waitMs <= 0) return null;
    opts.count('display_names_refused');
    return new ProtocolError('rate_limited', `too many display names set from your address: try again in ${Math.ceil(waitMs / 1000)} s`);
  };
  const release = (address: string) => {
    const n = (connectionsByAddress.get(address) ?? 1) - 1;
    if (n > 0) connectionsByAddress.set(address, n);
    else connectionsByAddress.delete(address);
  };

  const releaseCount = (d: VolunteerData) => {
    if (!d.counted) return;
    d.counted = false;
    release(d.address);
  };

  const handshake = (socket: Socket, next: (err?: Error) => void) => {
    const auth = socket.handshake.auth as { protocol?: unknown };
    if (auth?.protocol !== PROTOCOL_VERSION) {
      opts.count('handshakes_rejected', { code: 'protocol_version' });
      return next(handshakeError('protocol_version', `protocol version ${JSON.stringify(auth?.protocol)} is not supported; this server speaks ${PROTOCOL_VERSION}`));
    }
    const parsed = volunteerAuthSchema.safeParse(auth);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      opts.count('handshakes_rejected', { code: 'bad_request' });
      return next(handshakeError('bad_request', `handshake: ${issue.path.join('.') || 'auth'}: ${issue.message}`));
    }
    // Counted from here (before the asynchronous name lookup), so parallel handshakes cannot overshoot.
    const address = socket.handshake.address;
    const held = connectionsByAddress.get(address) ?? 0;
    if (held >= opts.maxConnectionsPerAddress) {
      opts.count('handshakes_rejected', { code: 'rate_limited' });
      return next(handshakeError('rate_limited', `${held} volunteer connections from your address already (at most ${opts.maxConnectionsPerAddress})`));
    }
    connectionsByAddress.set(address, held + 1);
    const { clientId, displayName } = parsed.data;
    const data: VolunteerData = {
      volunteerId: `v-${randomBytes(6).toString('hex')}`, capabilities: parsed.data.capabilities, clientId, displayName: displayName ?? null, address,
      jobId: null, waitingForWork: false, requestedJob: undefined, assigning: null, counted: true,
    };
    socket.data = data;
    (socket.handshake as { auth: unknown }).auth = PARSED_AUTH;
    // Released once, whichever comes first: a refused handshake, the socket's disconnect (onDisconnect),
    // or its connection closed while the name was looked up (no disconnect follows a socket that never
    // connected; Socket.IO connects it on the next tick, and nothing closes a connection in between).
    const fail = (e: Error) => {
      releaseCount(data);
      next(e);
    };
    // A name in the handshake is kept under the client id (a new or changed one takes from the
    // address's name writes); without one, the stored name (if any) holds.
    const named = !clientId ? Promise.resolve(null) : store.displayNames([clientId]).then((names) => {
      const stored = names.get(clientId) ?? null;
      if (!displayName) data.displayName = stored;
      if (!displayName || displayName === stored) return null;
      return nameWriteRefused(address) ?? store.setDisplayName(clientId, displayName).then(() => null);
    });
    named.then((refused) => {
      if (socket.conn.readyState !== 'open') return fail(handshakeError('bad_request', 'the connection closed during the handshake'));
      if (!refused) return next();
      opts.count('handshakes_rejected', { code: refused.code });
      fail(handshakeError(refused.code, refused.message));
    }, (e) => {
      opts.log(`handshake: display name lookup failed: ${(e as Error).message}`);
      fail(handshakeError('internal', 'internal error'));
    });
  };

  const offerWork = async (socket: Socket) => {
    const d = socket.data as VolunteerData;
    // The job is recorded inside the promise that job events wait on, so an event that waited
    // finds it set.
    const volunteer = { volunteerId: d.volunteerId, capabilities: d.capabilities, clientId: d.clientId, displayName: d.displayName, address: d.address };
    const assigning = hub.assign(volunteer, d.requestedJob).then((assignment) => {
      if (assignment) {
        d.jobId = assignment.job.id;
        d.waitingForWork = false;
      }
      return assignment;
    });
    d.assigning = assigning;
    try {
      return await assigning;
    } finally {
      if (d.assigning === assigning) d.assigning = null;
    }
  };

  // One set of handlers for every socket (each takes the socket it serves): a closure per event and
  // socket would cost every connection about 2 KiB of heap.
  const dataOf = (socket: Socket) => socket.data as VolunteerData;
  // A member's event goes straight to the hub; one for a job it is being assigned to waits for that first.
  const toJob = <E extends VolunteerEventName>(name: E) => (p: VolunteerEventParsed<E>, socket: Socket) => {
    const d = dataOf(socket);
    const jobId = (p as { jobId: string }).jobId;
    if (d.jobId === jobId) return hub.event(jobId, d.volunteerId, name, p);
    return afterAssigning(d, jobId).then(() => hub.event(jobId, d.volunteerId, name, p));
  };
  const afterAssigning = async (d: VolunteerData, jobId: string) => {
    if (d.assigning) await d.assigning.catch(() => {});
    if (d.jobId !== jobId) throw new ProtocolError(d.jobId ? 'not_member' : 'unknown_job', `this volunteer is not in job ${jobId}`);
  };
  const handlers: Record<VolunteerEventName, Handler> = {
    'work:request': async (p: VolunteerEventParsed<'work:request'>, socket: Socket) => {
      const d = dataOf(socket);
      if (p.jobId) await hub.summary(p.jobId); // an unknown job is refused before anything changes
      if (d.jobId) await hub.leave(d.jobId, d.volunteerId, 'asked for other work').catch(() => {});
      d.jobId = null;
      d.requestedJob = p.jobId;
      const assignment = await offerWork(socket);
      d.waitingForWork = !assignment;
      return assignment ? { assigned: true, jobId: assignment.job.id } : { assigned: false };
    },
    'model:loaded': toJob('model:loaded'),
    'round:ready': toJob('round:ready'),
    'round:result': toJob('round:result'),
    'round:failed': toJob('round:failed'),
    'round:validation': toJob('round:validation'),
    'evidence:upload': toJob('evidence:upload'),
    'replica:upload': toJob('replica:upload'),
    signal: toJob('signal'),
    'peers:rtt': toJob('peers:rtt'),
    'links:paths': toJob('links:paths'),
    'star:update': toJob('star:update'),
    'checkpoint:upload': toJob('checkpoint:upload'),
    metrics: toJob('metrics'),
    status: async (p: VolunteerEventParsed<'status'>, socket: Socket) => {
      const d = dataOf(socket);
      if (d.jobId) await hub.status(d.jobId, d.volunteerId, p);
    },
    profile: async (p: VolunteerEventParsed<'profile'>, socket: Socket) => {
      const d = dataOf(socket);
      if (!d.clientId) throw new ProtocolError('bad_request', 'profile: a display name is kept under a client id: connect with one');
      const stored = (await store.displayNames([d.clientId])).get(d.clientId) ?? null;
      if (p.displayName !== stored) {
        // Clearing a name is free; setting or changing one takes from the address's name writes.
        const refused = p.displayName === null ? null : nameWriteRefused(d.address);
        if (refused) throw refused;
        await store.setDisplayName(d.clientId, p.displayName);
      }
      d.displayName = p.displayName;
      return { displayName: p.displayName };
    },
    leave: async (p: VolunteerEventParsed<'leave'>, socket: Socket) => {
      const d = dataOf(socket);
      d.waitingForWork = false;
      if (d.jobId) await hub.leave(d.jobId, d.volunteerId, p.reason || 'left');
      d.jobId = null;
    },
  };
  // The event bucket refills on the namespace's clock, so a test can hold time still through a flood.
  const guard = { schemas: VOLUNTEER_EVENTS, handlers, count: opts.count, log: opts.log, now: () => clock.now() };
  function onDisconnect(this: Socket, reason: string): void {
    const d = dataOf(this);
    releaseCount(d);
    heartbeat.changed();
    d.waitingForWork = false;
    // A node shutting down leaves its jobs as stored: the volunteers rejoin wherever they reconnect.
    if (d.jobId && !hub.closing) hub.leave(d.jobId, d.volunteerId, `disconnected (${reason})`).catch((e) => opts.log(`leave after disconnect failed: ${(e as Error).message}`));
  }

  const onConnection = (socket: Socket) => {
    const d = dataOf(socket);
    socket.join(volunteerRoom(d.volunteerId));
    socket.emit('welcome', { volunteerId: d.volunteerId, protocol: PROTOCOL_VERSION, serverTime: clock.now(), displayName: d.displayName, heartbeatMs: heartbeat.current() });
    heartbeat.changed();
    guardSocket(socket, guard);
    socket.on('disconnect', onDisconnect);
  };
  for (const endpoint of endpoints) {
    endpoint.use(handshake);
    endpoint.onConnection(onConnection);
  }

  // Idle volunteers get the next job with room: at once when one is created, and periodically.
  const offerIdle = async () => {
    for (const socket of connections()) {
      if ((socket.data as VolunteerData).waitingForWork) await offerWork(socket).catch(() => {});
    }
  };
  hub.onJobCreated(() => void offerIdle());
  // A job's coordinator started anew on some node (its old one died with its node, or lost the lease):
  // this node's volunteers in it are members of nothing now. Told so, they ask for work again and
  // join as joiners do (the job's latest checkpoint).
  hub.onJobLoaded((jobId) => {
    for (const socket of connections()) {
      const d = socket.data as VolunteerData;
      if (d.jobId !== jobId) continue;
      d.jobId = null;
      const reason = 'its coordinator moved to another server node: ask for work again to rejoin';
      // Had it joined the new coordinator already (in the moment before this news), it leaves that too.
      hub.leave(jobId, d.volunteerId, reason).catch(() => {});
      socket.emit('job:end', { jobId, reason });
    }
  });
  const timer = setInterval(() => void offerIdle(), IDLE_OFFER_INTERVAL_MS);
  timer.unref();
  return {
    close: () => {
      clearInterval(timer);
      heartbeat.close();
      announcement.stop();
    },
  };
}
