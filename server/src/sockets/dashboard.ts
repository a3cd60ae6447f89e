// The /dashboard namespace: researchers (token in the handshake) subscribe to live job updates.
import { DASHBOARD_EVENTS, LIMITS, NAMESPACES, PROTOCOL_VERSION, dashboardAuthSchema, type Clock, type DashboardEventName } from '@tabfleet/protocol';
import type { Server } from 'socket.io';
import type { JobHub } from '../cluster/hub';
import type { Store } from '../store/store';
import { guardSocket, type Handler } from './guard';
import type { Count } from '../metrics-catalogue';

export const ALL_JOBS_ROOM = 'jobs';
export function jobRoom(jobId: string): string {
  return `job:${jobId}`;
}

export function attachDashboardNamespace(
  io: Server,
  hub: JobHub,
  store: Store,
  opts: {
    tokenMatches(token: string): boolean;
    /** A handshake from `address` brought a bad token (it costs that address more of its request bucket). */
    failedToken(address: string): void;
    count: Count;
    log(m: string): void;
    /** The event bucket's clock: the server's, as the volunteer namespace's. */
    clock: Clock;
  },
): void {
  const nsp = io.of(NAMESPACES.dashboard);
  nsp.use((socket, next) => {
    const auth = dashboardAuthSchema.safeParse(socket.handshake.auth);
    const fail = (code: string, message: string) => {
      opts.count('handshakes_rejected', { code });
      next(Object.assign(new Error(message), { data: { code } }));
    };
    if (!auth.success || auth.data.protocol !== PROTOCOL_VERSION) return fail('protocol_version', `dashboard handshake needs { protocol: ${PROTOCOL_VERSION}, token }`);
    if (!opts.tokenMatches(auth.data.token)) {
      opts.failedToken(socket.handshake.address);
      return fail('unauthorized', 'bad researcher token');
    }
    next();
  });
  nsp.on('connection', (socket) => {
    const handlers: Record<DashboardEventName, Handler> = {
      subscribe: async (p: { jobId?: string }) => {
        if (!p.jobId) {
          await socket.join(ALL_JOBS_ROOM);
          return { jobs: await hub.summaries() };
        }
        const job = await hub.summary(p.jobId);
        await socket.join(jobRoom(p.jobId));
        const [metrics, workers] = await Promise.all([store.metrics(p.jobId, LIMITS.maxMetricsRows), hub.workers(p.jobId)]);
        return { job, metrics, workers };
      },
      unsubscribe: async (p: { jobId?: string }) => {
        await socket.leave(p.jobId ? jobRoom(p.jobId) : ALL_JOBS_ROOM);
      },
    };
    guardSocket(socket, { schemas: DASHBOARD_EVENTS, handlers, count: opts.count, log: opts.log, now: () => opts.clock.now() });
  });
}
