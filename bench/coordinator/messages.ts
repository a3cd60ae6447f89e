// IPC between the coordinator benchmark (bench/coordinator.ts) and the processes it forks: the server
// node (server-process.ts) and the simulated-volunteer clients (client.ts). Plain JSON over the fork
// channel.

/** How the simulated volunteers behave; the same for every client process. */
export interface ClientBehaviour {
  /** Simulated local training between a commit and the next `round:ready`, uniform in [min, max] ms. */
  trainMs: [number, number];
  /** Simulated collective (ring allreduce) between `round:begin` and `round:result`, uniform in [min, max] ms. */
  allreduceMs: [number, number];
  /** The heartbeat asks for an ack, as a tab's does (packages/worker/src/runtime.ts sendStatus): the server answers each one. */
  heartbeatAck: boolean;
  /**
   * Ask for an ack on round:ready and round:result, as the runtime did before it stopped (the
   * server then writes two frames more per member and round). Without, as the runtime now, the
   * server answers only refusals (`protocol:error`).
   */
  ackRoundEvents: boolean;
  /** Where the volunteers connect: the lean endpoint (the runtime's) or Socket.IO's path. */
  endpoint: 'lean' | 'socket.io';
  /** Each volunteer's connection: light-socket.ts (socket.io-client's frames without its machinery) or socket.io-client. */
  client: 'light' | 'socket.io-client';
  /** Connections a client process opens at once while ramping. */
  connectConcurrency: number;
  /** Per-volunteer time limit from connect to admission (welcome, work:request, model:loaded). */
  joinTimeoutMs: number;
  /** Time limit for a whole step's joins. */
  rampTimeoutMs: number;
}

export type ToClient =
  /** Stops opening connections `rampTimeoutMs` after this arrives (the rest count as failed). */
  | { type: 'add'; jobs: { jobId: string; count: number; url: string }[]; rampTimeoutMs: number }
  /** Starts a measurement window: samples and counters are reset. */
  | { type: 'window' }
  /** Ends the window and replies with `samples`. */
  | { type: 'collect' }
  | { type: 'stop' };

export interface AddResult {
  type: 'added';
  requested: number;
  admitted: number;
  failed: number;
  /** First few failure reasons. */
  failures: string[];
  /** connect() → `welcome`, ms, per volunteer that got one. */
  welcomeMs: number[];
  /** connect() → admitted (model:loaded acked with admitted: true), ms. */
  admitMs: number[];
  ms: number;
}

export interface WindowSamples {
  type: 'samples';
  windowMs: number;
  /** Per (round, member): member received `round:begin` − the job's last `round:ready` was sent, ms. */
  barrierMs: number[];
  /** Per round: server began the round (round:begin `began`) − the job's last `round:ready` was sent, ms (1 ms resolution). */
  barrierServerMs: number[];
  /** Per round: the last member of the job received `round:begin` − the job's last `round:ready` was sent, ms. */
  barrierJobMs: number[];
  /** Per round: the first `round:begin` received − the round's begin on the server (delivery, ms). */
  deliveryMs: number[];
  /** Per (round, member): member received `round:commit` − the job's last `round:result` was sent, ms (the commit half). */
  commitMs: number[];
  /** Per (round, member) with both halves sampled: begin half + commit half, ms (the whole round as the member waits on it). */
  roundMs: number[];
  /** `signal` events sent and received (WebRTC signaling with new ring neighbours). */
  signalsSent: number;
  signalsReceived: number;
  /** Checkpoints uploaded as a round's uploader, and fetched over HTTP on `model:load`. */
  checkpointsUploaded: number;
  checkpointsFetched: number;
  /** The four counts above since the client process started. */
  totals: { signalsSent: number; signalsReceived: number; checkpointsUploaded: number; checkpointsFetched: number };
  roundsBegun: number;
  roundsCommitted: number;
  /** Rounds begun again after an abort (not sampled). */
  roundsReformed: number;
  roundsAborted: number;
  heartbeatsSent: number;
  /** Every event sent to the server (heartbeats included). */
  eventsSent: number;
  /** Acks with ok: false, protocol:error events, ack timeouts. */
  errors: number;
  errorSamples: string[];
  disconnects: number;
  disconnectReasons: Record<string, number>;
  jobEnds: number;
  connected: number;
  /** Jobs of this process that committed at least one round in the window, of how many. */
  jobsProgressing: number;
  jobs: number;
  /** This client process's event-loop delay in the window (ms), and CPU (user+system ms). */
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  cpuMs: number;
}

export type FromClient = { type: 'started'; pid: number } | AddResult | WindowSamples | { type: 'fatal'; message: string };

export type ToServer = { type: 'stats'; gc: boolean } | { type: 'snapshot'; file: string } | { type: 'exit' };

export interface ServerStats {
  type: 'stats';
  rssBytes: number;
  heapUsedBytes: number;
  heapTotalBytes: number;
  externalBytes: number;
  arrayBuffersBytes: number;
  /** Since the previous stats request: CPU (user+system ms), wall ms, and event-loop delay. */
  cpuMs: number;
  wallMs: number;
  loopDelayP50Ms: number;
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  gc: boolean;
  /** Since the previous stats request: the garbage collector's pauses (summed, the longest) and its major collections. */
  gcPauseMs: number;
  gcMaxPauseMs: number;
  gcMajor: number;
  /** Several nodes (summed above): each node's own figures. */
  nodes?: { rssBytes: number; heapUsedBytes: number; cpuMs: number }[];
  /** Several nodes: the redis-server's CPU since the previous stats and its RSS (both included in the sums above). */
  redis?: { cpuMs: number; rssBytes: number };
}

export type FromServer = { type: 'ready'; url: string; pid: number } | ServerStats | { type: 'snapshot'; file: string } | { type: 'fatal'; message: string };
