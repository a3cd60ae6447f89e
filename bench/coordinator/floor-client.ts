// Connections for the library floor (bench/coordinator/floor.ts forks this): up to a client
// process's share of socket.io-client connections to floor-server.ts, each a member of a job of the
// server's job size that follows the coordinator bench's round pattern with its behaviour (train,
// round:ready, round:begin, allreduce, round:result, round:commit, train …) and beats `status` at the
// period protocol's heartbeat.ts names for the node's volunteers (the Socket.IO and lean floors); or,
// for the `ws` floor, plain WebSocket connections that stay idle. The payloads are about the size of
// the real ones (a ready, a result with its metrics, a status), so the floor's server parses what the
// real one does. Every member of a
// job is in this process, so it times the round as the real bench's clients do (client.ts): begin =
// the job's last round:ready sent → this member received round:begin, commit = the last round:result
// sent → round:commit received, whole = both, per member and round.
import { heartbeatPeriodMs } from '@tabfleet/protocol';
import { io, type Socket } from 'socket.io-client';
import { WebSocket } from 'ws';
import type { ClientBehaviour } from './messages';

type Msg = { type: 'open'; kind: 'socketio' | 'lean' | 'ws'; url: string; jobs: string[]; jobSize: number; nodeVolunteers: number } | { type: 'window' } | { type: 'collect' } | { type: 'exit' };

if (!process.send) {
  console.error('forked by bench/coordinator/floor.ts only');
  process.exit(2);
}
const behaviour = JSON.parse(process.argv[2] ?? '') as ClientBehaviour;
process.on('disconnect', () => process.exit(0));
const send = (m: object) => process.send?.(m);
const uniform = ([lo, hi]: [number, number]) => lo + Math.random() * (hi - lo);
const held: { close(): void }[] = [];
/** Epoch milliseconds with sub-millisecond resolution. */
const now = () => performance.timeOrigin + performance.now();

/** Per job: how many members sent ready and result in the current round, and when the last did. */
interface JobClock { size: number; ready: number; lastReady: number; results: number; lastResult: number; commits: number }
/** Whole-round samples (ms) since the window began; null outside a window. */
let samples: number[] | null = null;

function member(url: string, jobId: string, heartbeatMs: number, job: JobClock): Promise<void> {
  const socket: Socket = io(url, { transports: ['websocket'], forceNew: true, reconnection: false, auth: { jobId } });
  held.push(socket);
  let step = 0;
  let beginMs: number | null = null;
  const ready = () => setTimeout(() => {
    socket.emit('round:ready', { jobId, seq: step + 1, step });
    if (++job.ready === job.size) job.lastReady = now();
  }, uniform(behaviour.trainMs));
  socket.on('round:begin', (b: { roundId: number; seq: number }) => {
    beginMs = job.ready === job.size ? now() - job.lastReady : null;
    setTimeout(() => {
      socket.emit('round:result', {
        jobId, roundId: b.roundId, seq: b.seq, checksum: '00c0ffee00c0ffee', step: step + 1,
        metrics: { loss: 0.42, samples: 32, wallMs: 1500, computeMs: 1200, bytesSent: 1_000_000, bytesReceived: 1_000_000 },
      });
      if (++job.results === job.size) job.lastResult = now();
    }, uniform(behaviour.allreduceMs));
  });
  socket.on('round:commit', (c: { step: number }) => {
    if (beginMs !== null && job.results === job.size) samples?.push(beginMs + now() - job.lastResult);
    beginMs = null;
    // The round's counts start over once its last member has its commit.
    if (++job.commits === job.size) Object.assign(job, { ready: 0, results: 0, commits: 0 });
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
  if (m.type === 'window') samples = [];
  if (m.type === 'collect') {
    send({ type: 'samples', roundMs: samples ?? [] });
    samples = null;
  }
  if (m.type !== 'open') return;
  const heartbeatMs = heartbeatPeriodMs(m.nodeVolunteers);
  const opens = m.jobs.flatMap((jobId) => {
    const job: JobClock = { size: m.jobSize, ready: 0, lastReady: 0, results: 0, lastResult: 0, commits: 0 };
    return Array.from({ length: m.jobSize }, () => () => (m.kind === 'ws' ? plainConnection(m.url) : member(m.url, jobId, heartbeatMs, job)));
  });
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
