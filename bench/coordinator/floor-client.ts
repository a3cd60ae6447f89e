// Connections for the library floor (bench/coordinator/floor.ts forks this): up to a client
// process's share of socket.io-client connections to floor-server.ts, each a member of a job of the
// server's job size that follows the coordinator bench's round pattern with its behaviour (train,
// round:ready, round:begin, allreduce, round:result, round:commit, train …) and beats `status` at the
// period protocol's heartbeat.ts names for the node's volunteers; or, for the `ws` floor, plain
// WebSocket connections that stay idle. The payloads are the size of the real ones (a ready, a result
// with its metrics, a status), so the floor's server parses what the real one does.
import { heartbeatPeriodMs } from '@tabfleet/protocol';
import { io, type Socket } from 'socket.io-client';
import { WebSocket } from 'ws';
import type { ClientBehaviour } from './messages';

type Msg = { type: 'open'; kind: 'socketio' | 'ws'; url: string; jobs: string[]; jobSize: number; nodeVolunteers: number } | { type: 'exit' };

if (!process.send) {
  console.error('forked by bench/coordinator/floor.ts only');
  process.exit(2);
}
const behaviour = JSON.parse(process.argv[2] ?? '') as ClientBehaviour;
process.on('disconnect', () => process.exit(0));
const send = (m: object) => process.send?.(m);
const uniform = ([lo, hi]: [number, number]) => lo + Math.random() * (hi - lo);
const held: { close(): void }[] = [];

function member(url: string, jobId: string, heartbeatMs: number): Promise<void> {
  const socket: Socket = io(url, { transports: ['websocket'], forceNew: true, reconnection: false, auth: { jobId } });
  held.push(socket);
  let step = 0;
  const ready = () => setTimeout(() => socket.emit('round:ready', { jobId, seq: step + 1, step }), uniform(behaviour.trainMs));
  socket.on('round:begin', (b: { roundId: number; seq: number }) => {
    setTimeout(() => socket.emit('round:result', {
      jobId, roundId: b.roundId, seq: b.seq, checksum: '00c0ffee00c0ffee', step: step + 1,
      metrics: { loss: 0.42, samples: 32, wallMs: 1500, computeMs: 1200, bytesSent: 1_000_000, bytesReceived: 1_000_000 },
    }), uniform(behaviour.allreduceMs));
  });
  socket.on('round:commit', (c: { step: number }) => {
    step = c.step;
    ready();
  });
  return new Promise((resolve, reject) => {
    socket.once('connect', () => {
      ready();
      setTimeout(() => setInterval(() => socket.emit('status', { jobId, phase: 'training', step, samplesPerSec: 250 }), heartbeatMs), Math.random() * heartbeatMs);
      resolve();
    });
    socket.once('connect_error', reject);
  });
}

function plainConnection(url: string): Promise<void> {
  const ws = new WebSocket(url.replace(/^http/, 'ws'));
  held.push(ws);
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
}

process.on('message', (m: Msg) => {
  if (m.type === 'exit') {
    for (const c of held) c.close();
    process.exit(0);
  }
  if (m.type !== 'open') return;
  const heartbeatMs = heartbeatPeriodMs(m.nodeVolunteers);
  const opens = m.jobs.flatMap((jobId) => Array.from({ length: m.jobSize }, () => () => (m.kind === 'socketio' ? member(m.url, jobId, heartbeatMs) : plainConnection(m.url))));
  const t0 = performance.now();
  void (async () => {
    try {
      for (let i = 0; i < opens.length; i += behaviour.connectConcurrency) await Promise.all(opens.slice(i, i + behaviour.connectConcurrency).map((open) => open()));
      send({ type: 'opened', count: opens.length, ms: performance.now() - t0 });
    } catch (e) {
      send({ type: 'fatal', message: `a floor connection failed: ${(e as Error).message}` });
    }
  })();
});
send({ type: 'started' });
