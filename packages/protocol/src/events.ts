// Socket.IO events between volunteers, dashboards and the server. Every client→server event is a
// zod schema in the tables below; the server validates against them and answers every event with an
// ack (`Ack`). docs/protocol.md describes the flow with a sample session.
import { z } from 'zod';
import { clientIdSchema, displayNameSchema, profileSchema } from './credit';
import { idSchema, type JobSpec, type JobSummary, type MetricPoint } from './jobs';
import { LIMITS } from './limits';
import { linkPathsSchema, type LinkPath } from './link-paths';
import { measureWire, type SizeLimit } from './wire-size';
import type { ReplicaTask } from './replication';

/** A round trip reported above this is no measurement of a link (ms). */
export const MAX_RTT_MS = 60_000;
/** Peers a member reports round trips to in one round result (its ring neighbours, or its group). */
export const MAX_RTT_PEERS = 32;

export const NAMESPACES = { volunteer: '/volunteer', dashboard: '/dashboard' } as const;

/**
 * The lean volunteer endpoint's path (server/src/sockets/lean-volunteers.ts): the /volunteer namespace
 * over WebSocket only, without Socket.IO's server objects. socket.io-client connects to it with
 * `{ path: VOLUNTEER_SOCKET_PATH, transports: ['websocket'] }`; Socket.IO's own path serves the same
 * namespace too.
 */
export const VOLUNTEER_SOCKET_PATH = '/volunteers/';

/**
 * How often the server pings a volunteer connection (Engine.IO's pingInterval, on both endpoints):
 * Socket.IO's default. At 10 s a node of 10,000 volunteers sent 1,000 pings a second and read as many
 * pongs, about an eighth of its messages. A member that goes silent is evicted by the coordinator's own
 * deadlines (barrier, round) whether or not its connection has been found dead yet.
 */
export const VOLUNTEER_PING_INTERVAL_MS = 25_000;
/** How long past a due ping a volunteer's client waits before it gives the connection up (Engine.IO's pingTimeout). */
export const VOLUNTEER_PING_TIMEOUT_MS = 20_000;

// ---------- errors and acks ----------

export const ERROR_CODES = [
  'bad_request', // payload failed its schema
  'unknown_event',
  'too_large',
  'protocol_version',
  'unauthorized',
  'unknown_job',
  'not_member', // the sender is not in that job or round
  'not_neighbour', // signaling to someone who is not a current ring neighbour
  'stale_round', // refers to a round that is not the current one
  'rate_limited',
  'conflict', // the request does not fit the job's state (e.g. stopping a finished job)
  'bad_tensor', // wrong length, dtype or non-finite values
  'capacity',
  'internal',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

export interface ProtocolErrorBody {
  code: ErrorCode;
  message: string;
}
export type Ack<T extends object = object> = ({ ok: true } & T) | { ok: false; error: ProtocolErrorBody };

/** A refusal with a code: thrown inside handlers, turned into an ack or HTTP status at the edge. */
export class ProtocolError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'ProtocolError';
  }
  toBody(): ProtocolErrorBody {
    return { code: this.code, message: this.message };
  }
}

// ---------- handshakes ----------

const finite = z.number().refine(Number.isFinite, 'must be a finite number');
const shortText = z.string().max(256);

export const capabilitiesSchema = z.strictObject({
  backend: z.enum(['webgpu', 'cpu']),
  adapter: z.strictObject({
    vendor: shortText.default(''),
    architecture: shortText.default(''),
    device: shortText.default(''),
    description: shortText.default(''),
    isCpu: z.boolean().default(false),
  }),
  limits: z.strictObject({
    maxStorageBufferBindingSize: z.number().int().min(0),
    maxBufferSize: z.number().int().min(0),
  }),
  features: z.array(z.string().max(64)).max(64).default([]),
  userAgent: shortText.optional(),
  /**
   * A network hint: where the volunteer is (the page's `?region=`, else its time zone's area, e.g.
   * "Europe"). Jobs with `regionalGroups` lay Moshpit groups out by it. Letters, digits, - _ / only.
   */
  region: z.string().max(64).regex(/^[A-Za-z0-9_\-/]+$/).optional(),
});
export type Capabilities = z.output<typeof capabilitiesSchema>;
export type CapabilitiesInput = z.input<typeof capabilitiesSchema>;

export const volunteerAuthSchema = z.strictObject({
  protocol: z.number().int(),
  capabilities: capabilitiesSchema,
  /**
   * Stable id chosen once by the browser and kept in its storage: a reconnect or a later visit with the
   * same id is the same volunteer for credit. Without one, credit goes to this connection only.
   */
  clientId: clientIdSchema.optional(),
  /** Name shown on public contributor pages (stored with the client id; needs one). */
  displayName: displayNameSchema.optional(),
}).refine((a) => a.displayName === undefined || a.clientId !== undefined, { path: ['displayName'], message: 'needs a clientId to be kept under' });
export type VolunteerAuth = z.input<typeof volunteerAuthSchema>;

export const dashboardAuthSchema = z.strictObject({ protocol: z.number().int(), token: z.string().min(1).max(256) });

// ---------- volunteer → server ----------

const checksum = z.string().regex(/^[0-9a-f]{8,64}$/, 'lower-case hex, 8 to 64 digits');
/** Binary arrives as a Buffer in Node and an ArrayBuffer in browsers; both become a Uint8Array. */
export const binaryAttachmentSchema = z
  .custom<Uint8Array | ArrayBuffer>((v) => v instanceof Uint8Array || v instanceof ArrayBuffer, 'must be binary (Uint8Array or ArrayBuffer)')
  // A plain Uint8Array either way (a Node Buffer's slice() would not copy).
  .transform((v) => (v instanceof Uint8Array && v.constructor === Uint8Array ? v : new Uint8Array(v)))
  .refine((v) => v.byteLength <= LIMITS.maxModelBytes, `at most ${LIMITS.maxModelBytes} bytes`);
const binary = binaryAttachmentSchema;

/**
 * Whether `v` is plain JSON (no binary) of at most `max` serialized bytes. Measured without serializing
 * or recursing (`measureWire`): serializing a 32 MiB Buffer to find out costs seconds, and data nested
 * 20,000 deep overflows JSON.stringify's recursion.
 */
function isSmallJson(v: unknown, max: number): boolean {
  if (v === undefined) return false;
  return !measureWire(v, { bytes: max, jsonOnly: true }).over;
}

const roundRef = { jobId: idSchema, roundId: z.number().int().min(1) };
const rttMsSchema = z.record(idSchema, z.number().finite().min(0).max(MAX_RTT_MS)).refine((r) => Object.keys(r).length <= MAX_RTT_PEERS, { message: `at most ${MAX_RTT_PEERS} peers` });
/** `signal.roundId` of a joiner's probe links to its `probePeers` (outside any round). */
export const PROBE_ROUND_ID = 0;

export const roundMetricsSchema = z.strictObject({
  loss: finite.nullable(),
  samples: z.number().int().min(0),
  wallMs: finite.min(0),
  /** The local steps alone (without compressing and reading back the payload): what a paced job's pace is measured on. */
  computeMs: finite.min(0).optional(),
  bytesSent: z.number().int().min(0),
  bytesReceived: z.number().int().min(0),
});

const digest = z.string().regex(/^[0-9a-f]{32}$/, 'a modelDigest: 32 lower-case hex digits');
const perMember = z.array(digest).max(LIMITS.maxGroupSize);
const refusals = z.array(z.strictObject({ member: idSchema, reason: z.string().max(300) })).max(LIMITS.maxGroupSize);
/**
 * A group round's report (collective's GroupAverage): the contributions to its own part this member
 * refused, and the digests of what it sent, received, aggregated and gathered, by member index.
 */
export const groupReportSchema = z.strictObject({
  refused: refusals,
  digests: z.strictObject({ sent: perMember, received: perMember, aggregate: digest, gathered: perMember }),
});
export type GroupReport = z.output<typeof groupReportSchema>;

/** A validator's recomputation of one part (collective's PartValidation); `aggregate` '' when it refused every contribution. */
export const partValidationSchema = z.strictObject({
  part: z.number().int().min(0).max(LIMITS.maxGroupSize - 1),
  received: perMember,
  aggregate: z.union([digest, z.literal('')]),
  refused: refusals,
});
export type PartValidationReport = z.output<typeof partValidationSchema>;

export const VOLUNTEER_EVENTS = {
  /** Ask for work, optionally in one job. */
  'work:request': z.strictObject({ jobId: idSchema.optional() }),
  /** The global model of sync `seq` is loaded (seq 0: initialized from the job's seed). */
  /** `from`: where the model came from, the server or a named member (absent: the server). */
  'model:loaded': z.strictObject({ jobId: idSchema, seq: z.number().int().min(0), checksum, from: z.union([z.literal('server'), z.strictObject({ peer: idSchema })]).optional() }),
  /** Local steps done; ready to take part in sync `seq`. */
  /** `steps`: paced LocalSGD/DiLoCo, the local steps this member took (it stops at the budget; see pacedStepCeiling). */
  'round:ready': z.strictObject({ jobId: idSchema, seq: z.number().int().min(1), step: z.number().int().min(0), steps: z.number().int().min(1).max(1_000_000).optional() }),
  /**
   * This member holds the round's result but has not applied it: `checksum` is of its parameters as
   * they will be once applied (for DDP, whose optimizer step runs at commit: of the parameters the
   * update applies to, then of the mean gradient). The server commits the round when every member has reported (two phases, so
   * an aborted round leaves no one with a partial or extra average applied).
   */
  'round:result': z.strictObject({
    ...roundRef, checksum, step: z.number().int().min(0), metrics: roundMetricsSchema, group: groupReportSchema.optional(),
    /** The smallest round trip (ms) this member measured to each peer it was linked to in the round (Moshpit jobs group by them). */
    rttMs: rttMsSchema.optional(),
  }),
  /** The round trips (ms) a joiner measured to the members the server named in its assignment (`probePeers`). */
  'peers:rtt': z.strictObject({ jobId: idSchema, rttMs: rttMsSchema }),
  /** The path each of this member's open links took (its selected ICE candidate pair, link-paths.ts): replaces its last report. */
  'links:paths': z.strictObject({ jobId: idSchema, links: linkPathsSchema }),
  /** The member could not finish the round (the server aborts and re-forms it). */
  'round:failed': z.strictObject({
    ...roundRef,
    code: z.enum(['peer_lost', 'deadline', 'unreachable', 'bad_frame', 'device_lost', 'internal']),
    message: z.string().max(1024).default(''),
  }),
  /** A validator's recomputation of the parts the server named in `round:validate` (one event with all of them). */
  'round:validation': z.strictObject({ ...roundRef, parts: z.array(partValidationSchema).min(1).max(LIMITS.maxGroupSize) }),
  /** Asked by `evidence:request`: this member's contribution to `part` of the round's average (little-endian f32, as on the wire). */
  'evidence:upload': z.strictObject({ ...roundRef, part: z.number().int().min(0).max(LIMITS.maxGroupSize - 1), data: binary }),
  /** The delta (start − end parameters, little-endian f32) of a replicated work unit this member was given (`work:replicate`). */
  'replica:upload': z.strictObject({ jobId: idSchema, unitId: idSchema, data: binary }),
  /** WebRTC signaling for a current ring neighbour, or (roundId PROBE_ROUND_ID) between a joiner and its probe peers; relayed as `signal` with `from`. */
  signal: z.strictObject({
    jobId: idSchema, roundId: z.number().int().min(PROBE_ROUND_ID),
    to: idSchema,
    data: z.unknown().refine((d) => isSmallJson(d, LIMITS.maxSignalBytes), `at most ${LIMITS.maxSignalBytes} bytes of JSON`),
  }),
  /** Star fallback: this member's update (little-endian f32) for the server to aggregate. */
  'star:update': z.strictObject({ ...roundRef, data: binary }),
  /**
   * The global model after sync `seq`, as safetensors, from the round's `uploader` once it applied the
   * round: its size in `bytes`, and the ack hands back a per-upload URL and token to PUT the file to in
   * byte ranges (any size up to the server's limit); or, within LIMITS.maxModelBytes, as `data` here.
   */
  'checkpoint:upload': z.strictObject({
    jobId: idSchema, seq: z.number().int().min(0), step: z.number().int().min(0), data: binary.optional(), bytes: z.number().int().min(1).max(2 ** 52).optional(),
  }).refine((u) => (u.data === undefined) !== (u.bytes === undefined), 'give either data (the file) or bytes (its size, to upload it over HTTP)'),
  /**
   * From the round's `evaluators` after a commit: test accuracy and loss of the global model of sync
   * `seq`, and its checksum (what a checkpoint of that sync must hold). The server combines several.
   */
  metrics: z.strictObject({ jobId: idSchema, seq: z.number().int().min(0), checksum, accuracy: finite.min(0).max(1).nullable(), loss: finite.nullable() }),
  /** Heartbeat with what the tab is doing, for the worker table. */
  status: z.strictObject({
    state: z.enum(['idle', 'loading', 'training', 'syncing', 'paused']),
    /** A background tab: the browser may throttle or freeze it. */
    hidden: z.boolean().default(false),
    step: z.number().int().min(0),
    samplesPerSec: finite.min(0),
    bytesSent: z.number().int().min(0),
    bytesReceived: z.number().int().min(0),
    /**
     * Bytes the tab has downloaded for its job so far (its shard, the model), counted up, never back. While
     * it loads, growth shows the load is moving: the server then holds its load deadline from the report.
     */
    downloadedBytes: z.number().int().min(0).max(2 ** 52).optional(),
  }),
  /** Sets or clears the display name kept under this connection's client id. */
  profile: profileSchema,
  /** Leaving on purpose (pagehide, pause): the server drops the member at once. */
  leave: z.strictObject({ reason: z.string().max(256).default('') }),
} as const;

export type VolunteerEventName = keyof typeof VOLUNTEER_EVENTS;

/**
 * The events that carry a model-sized binary attachment, and the field it is in (each of them is
 * `binaryAttachmentSchema`; a protocol test holds this table to the schemas). Every event is measured
 * before it is parsed (`eventSizeLimit`): this attachment at most LIMITS.maxModelBytes, everything
 * else in it (JSON text, and any binary anywhere else) at most LIMITS.maxEventBytes.
 */
export const ATTACHMENT_FIELDS = {
  'star:update': 'data', 'checkpoint:upload': 'data', 'replica:upload': 'data', 'evidence:upload': 'data',
} as const satisfies Partial<Record<VolunteerEventName, string>>;

/** What the server lets event `name` carry, checked on its raw argument before anything parses it. */
export function eventSizeLimit(name: string): SizeLimit {
  const field = Object.hasOwn(ATTACHMENT_FIELDS, name) ? ATTACHMENT_FIELDS[name as keyof typeof ATTACHMENT_FIELDS] : undefined;
  return field ? { bytes: LIMITS.maxEventBytes, attachment: { field, bytes: LIMITS.maxModelBytes } } : { bytes: LIMITS.maxEventBytes };
}
export type VolunteerEvent<E extends VolunteerEventName> = z.input<(typeof VOLUNTEER_EVENTS)[E]>;
export type VolunteerEventParsed<E extends VolunteerEventName> = z.output<(typeof VOLUNTEER_EVENTS)[E]>;

// ---------- server → volunteer ----------

/**
 * A STUN or TURN server for WebRTC (RTCIceServer's shape). TURN entries carry this volunteer's own
 * short-lived credentials (coturn's REST-API scheme: `username` is "<expiry unix s>:<volunteer id>").
 */
export interface IceServer {
  urls: string[];
  username?: string;
  credential?: string;
}

export interface Assignment {
  job: { id: string; spec: JobSpec };
  /** Stable data shard: this worker reads shard `index` of `count` for the whole job. */
  shard: { index: number; count: number };
  /** Where to download that shard (carries a ticket; may be relative to the server URL) when the server serves the dataset. */
  dataUrl?: string;
  /**
   * Regional Moshpit jobs: members to measure round trips to before reporting the model loaded
   * (link with signaling roundId PROBE_ROUND_ID, ping, report `peers:rtt`), so the joiner's first
   * groups already follow its links.
   */
  probePeers?: string[];
  /** The servers new peer links gather candidates through (absent or empty: host candidates only). */
  iceServers?: IceServer[];
}

/**
 * How long before a round's deadline a member gives up on its exchange and reports `round:failed`, so
 * the report reaches the server before the deadline passes: a member still silent then is evicted.
 * (100 ms in the simulated volunteers was not enough beside a CPU-bound process: the honest members'
 * reports came after the deadline and they were evicted with the silent one.)
 */
export const ROUND_DEADLINE_MARGIN_MS = 1_000;

export interface RoundBegin {
  jobId: string;
  roundId: number;
  /** The sync this round produces (committed syncs + 1). */
  seq: number;
  /** Ring order; in a group the owner of part i is members[i]; in star mode the members that send to the server. */
  members: string[];
  /** ring: allreduce (trusted jobs); group: robust averaging by per-part owners (untrusted jobs); star: through the server. */
  mode: 'ring' | 'group' | 'star';
  /** Server epoch ms when the round began, and by which it must be done (the job's pace sets the gap). */
  began: number;
  deadline: number;
  /** The member that uploads the global model after applying this round (a checkpoint), or null. */
  uploader: string | null;
  /** Members that must finish for the round to commit (all of them in a ring). */
  quorum: number;
  /**
   * Members that evaluate the committed model and report `metrics` with its checksum (chosen at
   * random by the server; empty when this sync is neither evaluated nor checkpointed).
   */
  evaluators: string[];
  /**
   * The evaluators report the committed model's checksum only, reading no test set: a checkpoint off
   * the job's evaluation schedule (evalEverySteps from evalFromStep), whose upload the checksums verify.
   */
  checksumOnly?: true;
  /** Paced jobs: the local steps each member did for this sync; each sends N·w/W times its payload, so the mean is weighted by samples. */
  steps?: Record<string, number>;
  /** `auto` jobs' ring rounds: the precision members send their dense payloads in (absent: the job's). */
  dtype?: 'f32' | 'f16';
  /**
   * Moshpit jobs (`groupSize`): `members` is this member's group only; the group's ring averages the
   * members' parameters (not deltas), which each adopts. Every group of a sync has its own roundId.
   */
  grouped?: true;
  /**
   * Ring rounds of `homeRings` jobs where members share an address: the homes in ring order, each its
   * members (a home's first member is its leader; a member alone at its address is a home of one).
   * Members sum over their home's ring, leaders allreduce the sums among homes and broadcast the mean
   * back inside their home (collective's HomeRing). `members` lists the same members, home by home.
   */
  homes?: string[][];
}

export interface VolunteerServerEvents {
  /**
   * `displayName`: the name stored under the handshake's client id (null when none is set);
   * `heartbeatMs`: how often to send `status` (heartbeat.ts: longer on a node with many volunteers).
   */
  welcome: (w: { volunteerId: string; protocol: number; serverTime: number; displayName: string | null; heartbeatMs: number }) => void;
  /** The node's heartbeat period changed (its volunteers grew or shrank past a doubling): send `status` every `ms` from now on. */
  heartbeat: (h: { ms: number }) => void;
  'job:assign': (a: Assignment) => void;
  /**
   * Load the global model of sync `seq` (url null: initialize from the job's seed) and report `model:loaded`.
   * `peers`: members holding that model whom the joiner may ask for it over a WebRTC link (signaled
   * as a probe) before the URL; what they send is taken only when its parameters' digest is `digest`.
   */
  'model:load': (m: { jobId: string; seq: number; step: number; url: string | null; peers?: string[]; digest?: string }) => void;
  'round:begin': (r: RoundBegin) => void;
  'round:abort': (r: { jobId: string; roundId: number; reason: string; lost: string[] }) => void;
  /**
   * The work this member said was ready for sync `seq` is dropped: syncs went on without it. The
   * job's model follows (`model:load`), as for a joiner.
   */
  'work:dropped': (w: { jobId: string; seq: number }) => void;
  /** An event sent without an ack was refused (one sent with an ack gets the refusal in its ack). */
  'protocol:error': (e: { event: string; code: ErrorCode; message: string }) => void;
  /**
   * A group round's results are in and their digests agree: every member sends each named part of its
   * contribution to the part's validator (Group.validate), and validators report `round:validation`.
   */
  'round:validate': (v: { jobId: string; roundId: number; checks: { part: number; validator: string }[] }) => void;
  /**
   * Redundant recompute: train `unit` as this round's own work (`original`), or recompute it for
   * another member (`replica`), and upload its delta (`replica:upload`). Sent before the commit of
   * the unit's starting sync, or at once for a tie-break.
   */
  'work:replicate': (t: ReplicaTask) => void;
  /** A validator and an owner disagree about `part`: upload this member's contribution to it (`evidence:upload`). */
  'evidence:request': (e: { jobId: string; roundId: number; part: number }) => void;
  /**
   * Every member reported its result: apply it now (and the uploader uploads the model). Paced jobs:
   * `steps`, each member's local steps for the next sync; paced LocalSGD and DiLoCo once a budget is
   * known, `budgetMs`, the time its local work should take (stop there: the steps are then a guide, at
   * most `pacedStepCeiling` of them).
   */
  'round:commit': (r: { jobId: string; roundId: number; seq: number; step: number; steps?: Record<string, number>; budgetMs?: number }) => void;
  /** Upload the checkpoint of sync `seq` now (the one asked first did not deliver a valid one). */
  'checkpoint:request': (r: { jobId: string; seq: number }) => void;
  signal: (s: { jobId: string; roundId: number; from: string; data: unknown }) => void;
  /** Star fallback result: the aggregated update (little-endian f32). */
  'star:result': (s: { jobId: string; roundId: number; data: Uint8Array | ArrayBuffer; contributors: number; rejected: number }) => void;
  'job:end': (e: { jobId: string; reason: string }) => void;
  /** A joiner was told to measure this member (its `probePeers`): open the link to it too (WebRTC's initiator may be either end), signaling with PROBE_ROUND_ID. */
  'peers:probe': (p: { jobId: string; peer: string }) => void;
  /** Fresh TURN credentials before the last ones expire, while this volunteer is a member: new links use these. */
  'ice:refresh': (r: { jobId: string; iceServers: IceServer[] }) => void;
}

// ---------- dashboard ----------

export const DASHBOARD_EVENTS = {
  /** Live updates for one job (or all jobs with no id). */
  subscribe: z.strictObject({ jobId: idSchema.optional() }),
  unsubscribe: z.strictObject({ jobId: idSchema.optional() }),
} as const;
export type DashboardEventName = keyof typeof DASHBOARD_EVENTS;

export interface WorkerRow {
  volunteerId: string;
  jobId: string | null;
  /** What the tab reports doing; `left` for a contributor that is no longer in the job. */
  state: string;
  /** The tab says it is in the background (hidden), where browsers throttle and may freeze pages. */
  hidden: boolean;
  /** Display name, or `volunteer <8 hex>` from the client id (as on the public contributor page). */
  contributor: string;
  /** Committed syncs of this job the volunteer was a member of (counted by the server). */
  syncs: number;
  adapter: string;
  backend: 'webgpu' | 'cpu';
  step: number;
  samplesPerSec: number;
  bytesSent: number;
  bytesReceived: number;
  /** While it loads (not admitted yet): the bytes its heartbeat says it has downloaded for the job so far; null otherwise. */
  downloadedBytes: number | null;
  /** Last round this worker finished, and its wall time (a proxy for link quality). */
  lastRound: number | null;
  lastRoundMs: number | null;
  /** How that round's update travelled: over peer links (ring, group) or through the server (star). */
  lastRoundMode: 'ring' | 'group' | 'star' | null;
  admitted: boolean;
  /**
   * Faults on record against its identity in this job (each one evicted it; see docs/protocol.md);
   * null for a job no coordinator holds (the records live in its memory).
   */
  faults: number | null;
  /**
   * Its identity's record across every job (persisted): parts of its work a check confirmed, faults,
   * and whether it is still on probation (its parts are checked first); null when unknown.
   */
  reputation: { verified: number; faults: number; probation: boolean } | null;
  /** Paced jobs: its measured time per local step, the steps it was given for this sync and its share of the sync's samples. */
  pace: { msPerStep: number | null; steps: number; share: number | null } | null;
  /** The paths of its links to other members, as it last reported them (`links:paths`); null for one that left. */
  links: LinkPath[] | null;
  /**
   * Moshpit jobs: the group it averaged in at the last sync it committed with (`index` of the sync's
   * `of` groups, 0-based); null otherwise (for one that left: while a node holds the job).
   */
  group: { seq: number; index: number; of: number } | null;
  /** Why the server last removed it for a fault in this job (null: none, or no coordinator holds the job). */
  lastFault: string | null;
  /** One that left: why (its tab closed, a fault, the job's end); null while it is a member. */
  leftReason: string | null;
}

export interface DashboardServerEvents {
  'job:update': (j: JobSummary) => void;
  'job:metrics': (m: { jobId: string; points: MetricPoint[] }) => void;
  'job:workers': (w: { jobId: string; workers: WorkerRow[] }) => void;
}

/** Parses an event argument or throws a `bad_request` ProtocolError naming the first problem. */
export function parseEvent<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const where = issue.path.length ? issue.path.join('.') : 'payload';
  throw new ProtocolError('bad_request', `${what}: ${where}: ${issue.message}`);
}
