// The JSON bodies the HTTP API answers with, as zod schemas for its OpenAPI document (openapi.ts).
// The types they describe are TypeScript interfaces in @tabfleet/protocol and the server; each schema
// is checked against its interface both ways at compile time, so neither can change without the other.
import {
  ERROR_CODES,
  JOB_STATES,
  jobSpecSchema,
  linkPathSchema,
  PATH_KINDS,
  RELAY_PROTOCOLS,
  type CheckpointInfo,
  type EmbedPermission,
  type JobSummary,
  type MetricPoint,
  type PublicContributors,
  type PublicInfo,
  type VolunteerCredit,
  type WorkerRow,
} from '@tabfleet/protocol';
import { z } from 'zod';
import type { RoundRecord } from '../store/store';
import type { UploadInfo } from '../uploads';
import type { CorpusFacts } from './text-datasets';

/** True when A and B are the same type (each assignable to the other). */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/** Compiles only when the schema's output is exactly the interface `T`. */
function matches<T>() {
  return <S extends z.ZodType>(schema: S & (Same<z.output<S>, T> extends true ? unknown : { mismatch: T })): S => schema;
}

const int = z.number().int();
const state = z.enum(JOB_STATES);

export const errorBody = z.strictObject({
  error: z.strictObject({ code: z.enum(ERROR_CODES), message: z.string() }),
}).meta({ id: 'Error', description: 'Every refusal: a code (its HTTP status follows from it) and a message naming what was wrong.' });

export const checkpointInfoBody = matches<CheckpointInfo>()(z.strictObject({
  seq: int, step: int, bytes: int, sha256: z.string(), createdAt: z.number(),
})).meta({ id: 'CheckpointInfo' });

const linkPathBody = linkPathSchema.meta({
  id: 'LinkPath',
  description: 'One link\'s selected ICE candidate pair as the member reported it: its own candidate type, its peer\'s, its relay\'s protocol to TURN, the round trip (ms).',
});

const linkSummaryBody = z.strictObject({
  total: int.describe('links among the members, each counted once'),
  direct: int,
  relayed: int.describe('links where either end\'s selected candidate is relayed (TURN)'),
  relayedShare: z.number().nullable().describe('relayed ÷ total; null with no links'),
  byKind: z.strictObject(Object.fromEntries(PATH_KINDS.map((k) => [k, int])) as Record<(typeof PATH_KINDS)[number], typeof int>)
    .describe('links by the farthest rung either end took: host, srflx (STUN), prflx, relay (TURN)'),
  relayProtocols: z.strictObject(Object.fromEntries(RELAY_PROTOCOLS.map((k) => [k, int])) as Record<(typeof RELAY_PROTOCOLS)[number], typeof int>)
    .describe('relayed links by how a relaying end reaches TURN (udp, tcp, tls)'),
}).meta({ id: 'LinkSummary' });

export const jobSummaryBody = matches<JobSummary>()(z.strictObject({
  id: z.string(),
  name: z.string(),
  spec: jobSpecSchema,
  state,
  createdAt: z.number(),
  updatedAt: z.number(),
  seq: int.describe('committed syncs so far'),
  step: int.describe('optimizer steps per worker so far'),
  workers: int,
  latestCheckpoint: checkpointInfoBody.nullable(),
  latestAccuracy: z.number().nullable(),
  endReason: z.string().optional(),
  notice: z.string().optional(),
  syncTime: z.strictObject({
    nextPredictedMs: z.number().nullable(),
    last: z.strictObject({ predictedMs: z.number(), actualMs: z.number() }).nullable(),
    medianError: z.number().nullable(),
    auto: z.strictObject({
      H: int,
      dtype: z.enum(['f32', 'f16']),
      exchangeMs: z.strictObject({ f32: z.number().nullable(), f16: z.number().nullable() }),
    }).nullable().optional(),
  }).optional(),
  links: linkSummaryBody.optional().describe('the members\' WebRTC links by the path they took, while a node coordinates the job'),
})).meta({ id: 'JobSummary' });

export const workerRowBody = matches<WorkerRow>()(z.strictObject({
  volunteerId: z.string(),
  jobId: z.string().nullable(),
  state: z.string(),
  hidden: z.boolean(),
  contributor: z.string(),
  syncs: int,
  adapter: z.string(),
  backend: z.enum(['webgpu', 'cpu']),
  step: int,
  samplesPerSec: z.number(),
  bytesSent: z.number(),
  bytesReceived: z.number(),
  downloadedBytes: z.number().nullable().describe('while it loads (not admitted yet): the bytes its heartbeat says it has downloaded for the job so far; null otherwise'),
  lastRound: int.nullable(),
  lastRoundMs: z.number().nullable(),
  lastRoundMode: z.enum(['ring', 'group', 'star']).nullable(),
  admitted: z.boolean(),
  faults: int.nullable(),
  reputation: z.strictObject({ verified: int, faults: int, probation: z.boolean() }).nullable(),
  pace: z.strictObject({ msPerStep: z.number().nullable(), steps: int, share: z.number().nullable() }).nullable(),
  links: z.array(linkPathBody).nullable().describe('the paths of its links to other members, as it last reported them (links:paths); null for one that left'),
  group: z.strictObject({ seq: int, index: int, of: int }).nullable()
    .describe('Moshpit jobs: the group it averaged in at the last sync it committed with (index of that sync\'s `of` groups, from 0); null otherwise'),
  lastFault: z.string().nullable().describe('why the server last removed it for a fault in this job; null: none, or no node coordinates the job'),
  leftReason: z.string().nullable().describe('for one that left: why (its tab closed, a fault, the job\'s end); null while a member'),
})).meta({ id: 'WorkerRow' });

export const metricPointBody = matches<MetricPoint>()(z.strictObject({
  seq: int, step: int, time: z.number(), loss: z.number().nullable(), accuracy: z.number().nullable(), samplesPerSec: z.number().nullable(),
  bytesSent: z.number().nullable(), workers: int, vouchers: int.nullable().optional(),
})).meta({ id: 'MetricPoint' });

export const roundBody = matches<RoundRecord>()(z.strictObject({
  jobId: z.string(),
  roundId: int,
  seq: int,
  mode: z.enum(['ring', 'group', 'star']),
  members: z.array(z.string()),
  outcome: z.enum(['running', 'committed', 'aborted']),
  startedAt: z.number(),
  endedAt: z.number().nullable(),
  detail: z.string().describe('why it was aborted, or the parameters\' checksum when it committed'),
})).meta({ id: 'Round' });

export const uploadBody = matches<UploadInfo>()(z.strictObject({
  id: z.string(), name: z.string(), kind: z.enum(['text', 'images']), bytes: int,
  records: z.strictObject({ train: int, validation: int }), createdAt: z.number(),
})).meta({ id: 'Upload' });

const split = z.strictObject({ tokens: int, bytes: int });
export const corpusFactsBody = matches<CorpusFacts>()(z.strictObject({
  source: z.union([z.literal('fortunes'), z.templateLiteral(['uploads/u-', z.string()])]),
  tokenizer: z.enum(['chars', 'bytes', 'gpt2']),
  records: z.strictObject({ train: int, validation: int }),
  train: split,
  validation: split,
  bytesPerToken: z.number(),
})).meta({ id: 'CorpusFacts' });

const publicJob = z.strictObject({
  id: z.string(), name: z.string(), state, preset: z.string(), dataset: z.string(), strategy: z.string(), compression: z.string(),
  workers: int, minWorkers: int, maxWorkers: int, step: int, targetSteps: int, modelBytes: int, syncBytes: int,
  syncBytesMeasured: z.boolean(), latestAccuracy: z.number().nullable(),
});
export const publicInfoBody = matches<PublicInfo>()(z.strictObject({
  server: z.strictObject({ name: z.string(), operator: z.string().nullable() }),
  jobs: z.array(publicJob).describe('open jobs in the order the scheduler offers them: the first is the one a new volunteer joins'),
})).meta({ id: 'PublicInfo' });

export const embedPermissionBody = matches<EmbedPermission>()(z.strictObject({
  allowed: z.boolean().describe('whether a page of this Origin may show the contribute widget (--allow-origin)'),
  origin: z.string().nullable().describe('the Origin the request came with (null: none)'),
  server: z.strictObject({ name: z.string(), operator: z.string().nullable() }),
})).meta({ id: 'EmbedPermission' });

const totals = { samples: z.number(), syncs: int, computeMs: z.number() };
export const publicContributorsBody = matches<PublicContributors>()(z.strictObject({
  job: z.strictObject({ id: z.string(), name: z.string(), state, preset: z.string(), dataset: z.string(), strategy: z.string() }),
  contributors: z.array(z.strictObject({ ...totals, name: z.string(), named: z.boolean(), firstAt: z.number(), lastAt: z.number() })),
})).meta({ id: 'PublicContributors' });

export const volunteerCreditBody = matches<VolunteerCredit>()(z.strictObject({ ...totals, displayName: z.string().nullable(), jobs: int })).meta({ id: 'VolunteerCredit' });

export const healthBody = z.strictObject({ ok: z.literal(true), node: z.string(), store: z.enum(['sqlite', 'redis']), uptimeSec: int }).meta({ id: 'Health' });
