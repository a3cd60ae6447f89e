// The library floor beside the real server (bench/coordinator/floor.ts forks this): what Socket.IO
// itself, or the `ws` package alone, costs for the coordinator bench's connections and round traffic,
// with none of tabfleet's server code. `socketio`: a bare Socket.IO server with the options
// server/src/app.ts gives its own (no deflate, no HTTP compression, the same ping interval and message
// bound, the handshake request let go), a room per job of `size` members, and the round pattern of the
// coordinator: when every member of a job sent `round:ready` it emits `round:begin` (its members named,
// as a ring round's does) to the job's room; when every member sent `round:result`, `round:commit`.
// `status` heartbeats are received and dropped. `lean`: the same rounds on lean-engine.ts, Socket.IO's
// wire protocol on `ws` with a few fields per connection (what a lean volunteer server could cost).
// `ws`: a plain WebSocket server holding connections (memory only). Stats over IPC as
// server-process.ts gives them (after a forced GC when asked).
import { createServer } from 'node:http';
import { LIMITS, VOLUNTEER_PING_INTERVAL_MS, VOLUNTEER_PING_TIMEOUT_MS } from '@tabfleet/protocol';
import { Server } from 'socket.io';
import { WebSocketServer } from 'ws';
import { LeanEngine } from './lean-engine';
import { sampleProcess } from './process-sample';

type Msg = { type: 'stats'; gc: boolean } | { type: 'exit' };

const kind = process.argv[2];
const size = Number(process.argv[3]);
if (!process.send || !['socketio', 'lean', 'ws'].includes(kind) || !(size >= 1)) {
  console.error('usage: forked by bench/coordinator/floor.ts with <socketio|lean|ws> <jobSize>');
  process.exit(2);
}
process.on('disconnect', () => process.exit(0));
const send = (m: object) => process.send?.(m);

const http = createServer();
let connections = 0;
let events = 0;

interface JobRound { members: string[]; ready: number; results: number; seq: number; roundId: number }

/** What the round logic uses of a connection: Socket.IO's socket, or the lean engine's. */
interface RoundSocket { id: string; join(room: string): unknown; on(event: string, handler: () => void): void }
const jobs = new Map<string, JobRound>();

/** The coordinator's round pattern for one member of job `jobId`, broadcasting through `toRoom`. */
function serveRounds(socket: RoundSocket, jobId: string, toRoom: (room: string) => { emit(event: string, body: object): unknown }): void {
  connections++;
  let job = jobs.get(jobId);
  if (!job) jobs.set(jobId, (job = { members: [], ready: 0, results: 0, seq: 0, roundId: 0 }));
  job.members.push(socket.id);
  void socket.join(jobId);
  socket.on('status', () => void events++);
  socket.on('round:ready', () => {
    events++;
    if (++job.ready < size) return;
    job.ready = 0;
    job.seq++;
    job.roundId++;
    const began = Date.now();
    toRoom(jobId).emit('round:begin', {
      jobId, roundId: job.roundId, seq: job.seq, members: job.members, mode: 'ring', began, deadline: began + 60_000, uploader: null, quorum: size, evaluators: [],
    });
  });
  socket.on('round:result', () => {
    events++;
    if (++job.results < size) return;
    job.results = 0;
    toRoom(jobId).emit('round:commit', { jobId, roundId: job.roundId, seq: job.seq, step: job.seq });
  });
}

if (kind === 'socketio') {
  const io = new Server(http, {
    maxHttpBufferSize: LIMITS.maxSocketMessageBytes, serveClient: false, perMessageDeflate: false, httpCompression: false,
    pingInterval: VOLUNTEER_PING_INTERVAL_MS, pingTimeout: VOLUNTEER_PING_TIMEOUT_MS, transports: ['websocket'],
  });
  io.engine.on('connection', (raw: { request: unknown }) => {
    raw.request = null;
  });
  io.on('connection', (socket) => {
    serveRounds(socket, String((socket.handshake.auth as { jobId?: unknown }).jobId), (room) => io.to(room));
    socket.on('disconnect', () => void connections--);
  });
} else if (kind === 'lean') {
  const engine = new LeanEngine(http, { pingIntervalMs: VOLUNTEER_PING_INTERVAL_MS, maxPayload: LIMITS.maxSocketMessageBytes }, (socket) => {
    serveRounds(socket, String((socket.auth as { jobId?: unknown }).jobId), (room) => engine.to(room));
    socket.ws.on('close', () => void connections--);
  });
} else {
  const wss = new WebSocketServer({ server: http, perMessageDeflate: false, maxPayload: LIMITS.maxSocketMessageBytes });
  wss.on('connection', (ws) => {
    connections++;
    ws.on('message', () => void events++);
    ws.on('close', () => void connections--);
  });
}

let lastEvents = 0;
process.on('message', (m: Msg) => {
  if (m.type === 'exit') process.exit(0);
  if (m.type !== 'stats') return;
  const { mem, cpuMs, wallMs, gc } = sampleProcess(m.gc);
  send({ type: 'stats', rssBytes: mem.rss, heapUsedBytes: mem.heapUsed, connections, events: events - lastEvents, cpuMs, wallMs, gc });
  lastEvents = events;
});

http.listen(0, '127.0.0.1', () => {
  const address = http.address();
  if (address === null || typeof address === 'string') throw new Error('no TCP address');
  send({ type: 'ready', url: `http://127.0.0.1:${address.port}` });
});
