// Volunteers as Node processes' objects for tests: a VolunteerRuntime with a JobEngine on the CPU
// backend and a transport from an in-memory network (or one given), connected to a real server over Socket.IO.
import { MemoryNetwork, type Signaler, type Transport } from '@tabfleet/collective';
import { NAMESPACES, PROTOCOL_VERSION, VOLUNTEER_SOCKET_PATH, type Clock, type IceServer } from '@tabfleet/protocol';
import { CpuBackend } from '@tabfleet/tensor';
import { io } from 'socket.io-client';
import { JobEngine } from './job-engine';
import { VolunteerRuntime, type RuntimeStatus } from './runtime';

export const NODE_CAPABILITIES = {
  backend: 'cpu' as const,
  adapter: { vendor: 'node', architecture: 'cpu', device: 'test', description: 'CPU reference backend' },
  limits: { maxStorageBufferBindingSize: 1 << 30, maxBufferSize: 1 << 30 },
  features: [],
};

/**
 * `links`: an in-memory network, or a transport per volunteer (e.g. node WebRTC over the server's
 * signaling). `clock`: the runtime's and the engine's (default realClock).
 */
export function nodeVolunteer(
  serverUrl: string,
  links: MemoryNetwork | ((volunteerId: string, signaler: Signaler, iceServers: () => IceServer[]) => Transport),
  opts: { jobId?: string; log?: (l: string) => void; slowdown?: number; clock?: Clock; onStatus?: (s: RuntimeStatus) => void; joinProbeTimeoutMs?: number } = {},
) {
  // It never reconnects, so its one handshake may take long: the client's default 20 s cut one of six off a job of five beside a busy browser test.
  const auth = { protocol: PROTOCOL_VERSION, capabilities: NODE_CAPABILITIES };
  const socket = io(`${serverUrl}${NAMESPACES.volunteer}`, { auth, path: VOLUNTEER_SOCKET_PATH, transports: ['websocket'], reconnection: false, timeout: 120_000 });
  const engine = new JobEngine(new CpuBackend('f32'), { slowdown: opts.slowdown, clock: opts.clock });
  const runtime = new VolunteerRuntime({
    socket, serverUrl, engine, jobId: opts.jobId, log: opts.log, clock: opts.clock, onStatus: opts.onStatus, joinProbeTimeoutMs: opts.joinProbeTimeoutMs,
    createTransport: (id, signaler, iceServers) => (links instanceof MemoryNetwork ? links.endpoint(id) : links(id, signaler, iceServers)),
  });
  return { socket, engine, runtime };
}

export { fetchModel, putCheckpoint, UPLOAD_CHUNK_BYTES } from './checkpoint-transfer';
