// Every size and rate the server enforces, in one place. Clients read these too so they fail
// before sending rather than after.

/** Bumped on any incompatible change to events or frames; checked at connect. */
export const PROTOCOL_VERSION = 1;

export const LIMITS = {
  /**
   * Largest event argument besides a model attachment: its JSON text and any binary in it, measured
   * before anything parses it (`measureWire`, `eventSizeLimit`).
   */
  maxEventBytes: 64 * 1024,
  /** Largest WebRTC signaling blob (an SDP offer is a few KiB). */
  maxSignalBytes: 16 * 1024,
  /**
   * Largest model vector or checkpoint file sent as a Socket.IO attachment (star update, replica,
   * evidence, a checkpoint sent as `data`). Checkpoints and model loads of any size go over HTTP in
   * byte ranges, bounded by the server's own limit (`maxModelBytes` option, 2 GiB by default).
   */
  maxModelBytes: 32 * 1024 * 1024,
  /**
   * Socket.IO's own cap per message: the largest legitimate event, a model attachment (maxModelBytes)
   * and the rest of its argument (maxEventBytes).
   */
  maxSocketMessageBytes: 32 * 1024 * 1024 + 64 * 1024,
  /** Largest HTTP JSON body. */
  maxHttpJsonBytes: 64 * 1024,
  /** Token bucket per socket: sustained events per second and burst size. */
  eventsPerSecond: 50,
  eventBurst: 100,
  /** Events refused for rate within `floodWindowMs` before the socket is disconnected as a flood. */
  floodDisconnectAfter: 200,
  floodWindowMs: 10_000,
  /** Concurrent jobs that are not finished. */
  maxActiveJobs: 64,
  /** Members of a job that is one ring (or one group). */
  maxWorkersPerJob: 256,
  /** Members of a job that averages in Moshpit groups (`groupSize`): no round spans more than a group. */
  maxWorkersPerGroupedJob: 10_000,
  /** Members of one averaging group (all-to-all links: N−1 data channels per tab); an untrusted job is one group. */
  maxGroupSize: 16,
  /** Rows returned by one metrics query. */
  maxMetricsRows: 100_000,
  idMaxLength: 64,
} as const;

/** Timing of the round clock; a job may not go below these. */
export const ROUND_TIMING = {
  /** How long a ring round may take before it is aborted and re-formed. */
  roundTimeoutMs: 60_000,
  /** How long members that are admitted may take to all reach the barrier before the slow ones are dropped. */
  barrierTimeoutMs: 120_000,
  /** A late joiner's model load must finish within this. */
  loadTimeoutMs: 120_000,
} as const;
