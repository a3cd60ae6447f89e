// What each HTTP route of routes.ts takes and answers, for the OpenAPI document (openapi.ts): one
// entry per path template, beside the ROUTES table rather than in it. openapi.test.ts fails when a
// route of ROUTES has no entry here, or an entry names a route that ROUTES lacks.
import { CHECKPOINT_SHA256_HEADER, CHECKPOINT_SYNC_HEADER, creditRequestSchema, idSchema, jobSpecSchema, TOKENIZERS, uploadIdSchema, type ErrorCode } from '@tabfleet/protocol';
import { MAX_IMAGE_UPLOAD_BYTES, MAX_TEXT_UPLOAD_BYTES } from '@tabfleet/data';
import { z } from 'zod';
import {
  corpusFactsBody, embedPermissionBody, healthBody, jobSummaryBody, metricPointBody, publicContributorsBody, publicInfoBody, roundBody, uploadBody, volunteerCreditBody, workerRowBody,
} from './api-bodies';

/**
 * Who may call a route: anyone; the researcher (`Authorization: Bearer <token>`); or a volunteer
 * holding a ticket from its assignment (in the query, with the job's id), else the researcher; or the
 * uploader of one checkpoint (`Authorization: Bearer <upload token>`).
 */
export type RouteAuth = 'public' | 'researcher' | 'ticket' | 'upload';

/** A body's media type and what it holds: a zod schema for JSON, else bytes or text. */
export type Content = Record<string, z.ZodType | 'binary' | 'text'>;

export interface ParamDoc {
  description: string;
  schema: z.ZodType;
  /** A value the route accepts: the document shows it, and the coverage check builds a path from it. */
  example: string | number;
  /** Query parameters only (path parameters always are). */
  required?: boolean;
}

export interface RouteDoc {
  method: 'GET' | 'POST' | 'PUT';
  /** The path as an OpenAPI template: `{name}` for each path parameter. */
  path: string;
  summary: string;
  description?: string;
  auth: RouteAuth;
  params?: Record<string, ParamDoc>;
  query?: Record<string, ParamDoc>;
  body?: { description: string; content: Content };
  ok: { status: 200 | 201; description: string; content: Content; headers?: Record<string, string> };
  /** Refusals the route may answer with besides `internal` (and `unauthorized` where a token is needed). */
  errors: ErrorCode[];
}

const jobId: ParamDoc = { description: 'the job\'s id, as POST /api/jobs returned it', schema: idSchema, example: 'job-0123456789' };
const uploadId: ParamDoc = { description: 'an uploaded dataset\'s id, as POST /api/datasets returned it', schema: uploadIdSchema, example: 'u-0123456789ab' };
const shardParams: Record<string, ParamDoc> = {
  index: { description: 'which shard, 0 to count - 1', schema: z.int().min(0).max(9999), example: 0 },
  count: { description: 'how many shards the dataset is cut into', schema: z.int().min(1).max(9999), example: 4 },
};
const seed: ParamDoc = { description: 'the job\'s seed, which deals the examples to shards (default 1)', schema: z.int().min(0), example: 1 };
const ticketQuery: Record<string, ParamDoc> = {
  job: { description: 'the job whose assignment carried the ticket', schema: idSchema, example: 'job-0123456789' },
  ticket: { description: 'the ticket from the assignment (a researcher sends the token instead)', schema: z.string(), example: '0f1e2d3c' },
};
const textCut: Record<string, ParamDoc> = {
  tokenizer: { description: 'how the text is cut into tokens', schema: z.enum(TOKENIZERS.filter((t) => t !== 'chars')), example: 'bytes', required: true },
  context: { description: 'the model\'s context: tokens per window', schema: z.int().min(2).max(4096), example: 128, required: true },
};
/** An upload's shard or validation part: cut by tokenizer and context when the upload is a text. */
const textCutIfText: Record<string, ParamDoc> = {
  tokenizer: { ...textCut.tokenizer, description: 'a text upload: how it is cut into tokens', required: false },
  context: { ...textCut.context, description: 'a text upload: tokens per window', required: false },
};
const safetensors = { 'application/octet-stream': 'binary' } as const;
const checkpointUpload: ParamDoc = {
  description: 'a checkpoint upload\'s id, from the URL in the ack of `checkpoint:upload`', schema: z.string().regex(/^cu-[0-9a-f]{16}$/), example: 'cu-0123456789abcdef',
};
const uploadProgressBody = z.strictObject({ bytes: z.int().min(1), received: z.int().min(0) });
const checkpointHeaders = {
  [CHECKPOINT_SYNC_HEADER]: 'the sync whose model the file holds',
  [CHECKPOINT_SHA256_HEADER]: 'the SHA-256 (hex) of the file, which a client checks its copy against',
};
const json = (schema: z.ZodType): Content => ({ 'application/json': schema });

export const ROUTE_DOCS: RouteDoc[] = [
  {
    method: 'GET', path: '/api/public/info', auth: 'public', summary: 'Who runs this server and the open jobs a new volunteer would join, in order',
    ok: { status: 200, description: 'the server and its open jobs', content: json(publicInfoBody) }, errors: [],
  },
  {
    method: 'GET', path: '/api/public/jobs/{id}/contributors', auth: 'public', summary: 'A job\'s public contributor list: names and credit, most samples first',
    params: { id: jobId }, ok: { status: 200, description: 'the job and its contributors', content: json(publicContributorsBody) }, errors: ['bad_request', 'unknown_job'],
  },
  {
    method: 'GET', path: '/api/public/embed', auth: 'public', summary: 'Whether the requesting page\'s origin may embed the contribute widget',
    description: 'Read by the <tabfleet-contribute> element from any origin (CORS *); the answer depends on the Origin header.',
    ok: { status: 200, description: 'the origin, whether it may embed, and who runs the server', content: json(embedPermissionBody) }, errors: [],
  },
  {
    method: 'POST', path: '/api/public/credit', auth: 'public', summary: 'A browser\'s own credit over all jobs',
    description: 'The client id travels in the body, so it stays out of URLs and logs.',
    body: { description: 'the browser\'s client id', content: json(creditRequestSchema) },
    ok: { status: 200, description: 'its totals (null before its first sync)', content: json(z.strictObject({ credit: volunteerCreditBody.nullable() })) }, errors: ['bad_request', 'too_large'],
  },
  {
    method: 'GET', path: '/api/openapi.json', auth: 'public', summary: 'This document: the HTTP API as OpenAPI 3.1',
    ok: { status: 200, description: 'the OpenAPI document', content: json(z.looseObject({ openapi: z.literal('3.1.0') })) }, errors: [],
  },
  {
    method: 'GET', path: '/healthz', auth: 'public', summary: 'Liveness: the node, its store and its uptime',
    ok: { status: 200, description: 'the node is up', content: json(healthBody) }, errors: [],
  },
  {
    method: 'GET', path: '/metrics', auth: 'public', summary: 'Prometheus metrics (text exposition format)',
    ok: { status: 200, description: 'the metrics', content: { 'text/plain; version=0.0.4': 'text' } }, errors: [],
  },
  {
    method: 'GET', path: '/api/jobs', auth: 'researcher', summary: 'Every job, newest first',
    ok: { status: 200, description: 'the jobs', content: json(z.strictObject({ jobs: z.array(jobSummaryBody) })) }, errors: [],
  },
  {
    method: 'POST', path: '/api/jobs', auth: 'researcher', summary: 'Create a job',
    description: 'Only `preset` is required: every section the spec leaves out takes its default, and the job returned shows the whole spec. '
      + 'A refusal names the first field at fault by its path (e.g. `hyperparameters.lr`).',
    body: { description: 'the job spec', content: json(jobSpecSchema) },
    ok: { status: 201, description: 'the job, waiting for volunteers', content: json(z.strictObject({ job: jobSummaryBody })) },
    errors: ['bad_request', 'too_large', 'capacity', 'conflict'],
  },
  {
    method: 'GET', path: '/api/jobs/{id}', auth: 'researcher', summary: 'One job and its workers',
    params: { id: jobId },
    ok: {
      status: 200, description: 'the job (with its members\' links by path) and its workers (each with the paths of its WebRTC links)',
      content: json(z.strictObject({ job: jobSummaryBody, workers: z.array(workerRowBody) })),
    },
    errors: ['bad_request', 'unknown_job'],
  },
  {
    method: 'POST', path: '/api/jobs/{id}/stop', auth: 'researcher', summary: 'Stop a job',
    params: { id: jobId }, ok: { status: 200, description: 'the job, stopped', content: json(z.strictObject({ job: jobSummaryBody })) },
    errors: ['bad_request', 'unknown_job', 'conflict'],
  },
  {
    method: 'GET', path: '/api/jobs/{id}/metrics', auth: 'researcher', summary: 'Every metric point of a job (JSON, or CSV with format=csv)',
    params: { id: jobId },
    query: { format: { description: '`csv` for the CSV file', schema: z.enum(['json', 'csv']), example: 'json' } },
    ok: {
      status: 200, description: 'the points, oldest first',
      content: { 'application/json': z.strictObject({ jobId: z.string(), points: z.array(metricPointBody) }), 'text/csv': 'text' },
    },
    errors: ['bad_request', 'unknown_job'],
  },
  {
    method: 'GET', path: '/api/jobs/{id}/metrics.csv', auth: 'researcher', summary: 'Every metric point of a job as a CSV file',
    params: { id: jobId }, ok: { status: 200, description: 'a header row, then one row a point', content: { 'text/csv': 'text' } }, errors: ['bad_request', 'unknown_job'],
  },
  {
    method: 'GET', path: '/api/jobs/{id}/rounds', auth: 'researcher', summary: 'A job\'s rounds: members, outcome and why each aborted one was',
    params: { id: jobId }, ok: { status: 200, description: 'the rounds', content: json(z.strictObject({ jobId: z.string(), rounds: z.array(roundBody) })) },
    errors: ['bad_request', 'unknown_job'],
  },
  {
    method: 'GET', path: '/api/jobs/{id}/checkpoint', auth: 'researcher', summary: 'The job\'s latest checkpoint as safetensors',
    params: { id: jobId },
    ok: { status: 200, description: 'the model\'s tensors', content: safetensors, headers: checkpointHeaders },
    errors: ['bad_request', 'unknown_job'],
  },
  {
    method: 'GET', path: '/api/jobs/{id}/checkpoints/{seq}', auth: 'ticket', summary: 'The checkpoint of one sync as safetensors (a volunteer\'s model download)',
    params: { id: jobId, seq: { description: 'the sync', schema: z.int().min(0).max(999_999_999), example: 3 } },
    query: { ticket: ticketQuery.ticket },
    description: 'Answers `Range: bytes=START-[END]` with 206 and that part (416 past the end), so a dropped download resumes where it stopped.',
    ok: { status: 200, description: 'the model\'s tensors', content: safetensors, headers: checkpointHeaders },
    errors: ['bad_request', 'unknown_job'],
  },
  {
    method: 'GET', path: '/api/checkpoint-uploads/{upload}', auth: 'upload', summary: 'How much of a checkpoint upload the server holds (an uploader resumes from there)',
    params: { upload: checkpointUpload },
    ok: { status: 200, description: 'the upload\'s size and the bytes received', content: json(uploadProgressBody) }, errors: ['unknown_job'],
  },
  {
    method: 'PUT', path: '/api/checkpoint-uploads/{upload}', auth: 'upload', summary: 'One chunk of a checkpoint upload, written as it arrives',
    description: '`Content-Range: bytes START-END/TOTAL`: START must be the bytes the server holds (else 409, which says how many), TOTAL the size the '
      + 'uploader declared. A dropped connection keeps what arrived. The last chunk hands the file to the job, which checks it is the job\'s model (else 400 '
      + 'and the uploader is evicted) and stores it once it matches the digest the sync\'s evaluators agree on.',
    params: { upload: checkpointUpload },
    body: { description: 'the chunk\'s bytes', content: safetensors },
    ok: { status: 200, description: 'what the server holds now; complete once every byte is in', content: json(uploadProgressBody.extend({ complete: z.boolean() })) },
    errors: ['bad_request', 'bad_tensor', 'conflict', 'unknown_job'],
  },
  {
    method: 'GET', path: '/datasets/fashion-mnist/shards/{index}/{count}', auth: 'ticket', summary: 'One member\'s shard of Fashion-MNIST\'s training set as safetensors',
    params: shardParams, query: { seed, ...ticketQuery },
    ok: { status: 200, description: 'images and labels of the shard', content: safetensors }, errors: ['bad_request', 'rate_limited'],
  },
  {
    method: 'GET', path: '/datasets/fortunes/shards/{index}/{count}', auth: 'ticket', summary: 'One member\'s training windows of the fortunes text, as the job cuts it',
    params: shardParams, query: { seed, ...textCut, ...ticketQuery },
    ok: { status: 200, description: 'token windows as safetensors', content: safetensors }, errors: ['bad_request', 'rate_limited'],
  },
  {
    method: 'GET', path: '/datasets/uploads/{upload}/shards/{index}/{count}', auth: 'ticket', summary: 'One member\'s shard of an uploaded text or image set',
    description: 'A text is cut by `tokenizer` and `context`; an image set\'s shard is images and labels.',
    params: { upload: uploadId, ...shardParams }, query: { seed, ...textCutIfText, ...ticketQuery },
    ok: { status: 200, description: 'the shard as safetensors', content: safetensors }, errors: ['bad_request', 'rate_limited', 'unknown_job'],
  },
  {
    method: 'GET', path: '/datasets/fortunes/validation', auth: 'public', summary: 'The validation windows of the fortunes text every evaluator reads',
    query: textCut, ok: { status: 200, description: 'token windows as safetensors', content: safetensors }, errors: ['bad_request', 'rate_limited'],
  },
  {
    method: 'GET', path: '/datasets/uploads/{upload}/validation', auth: 'ticket', summary: 'The validation part of an uploaded text or image set',
    params: { upload: uploadId },
    query: {
      shard: { description: 'the member\'s shard, `index/count`, whose ticket this is', schema: z.string().regex(/^\d{1,4}\/\d{1,4}$/), example: '0/4' },
      seed, ...textCutIfText, ...ticketQuery,
    },
    ok: { status: 200, description: 'validation windows or images as safetensors', content: safetensors }, errors: ['bad_request', 'rate_limited', 'unknown_job'],
  },
  {
    method: 'GET', path: '/datasets/fortunes/info', auth: 'public', summary: 'The fortunes text\'s sizes under a tokenizer (bytes per token, for bits per byte)',
    query: { tokenizer: textCut.tokenizer }, ok: { status: 200, description: 'the text\'s facts', content: json(corpusFactsBody) }, errors: ['bad_request'],
  },
  {
    method: 'GET', path: '/datasets/uploads/{upload}/info', auth: 'researcher', summary: 'An uploaded text\'s sizes under a tokenizer',
    params: { upload: uploadId }, query: { tokenizer: textCut.tokenizer },
    ok: { status: 200, description: 'the text\'s facts', content: json(corpusFactsBody) }, errors: ['bad_request', 'unknown_job'],
  },
  {
    method: 'POST', path: '/api/datasets', auth: 'researcher', summary: 'Upload a text or an image set, checked before anything is stored',
    description: `kind=text: a UTF-8 text as the body (at most ${MAX_TEXT_UPLOAD_BYTES} bytes). kind=images: a safetensors file as the body, `
      + `or multipart/form-data with the parts \`images\` and \`labels\` (IDX files) or \`safetensors\` (at most ${MAX_IMAGE_UPLOAD_BYTES} bytes). Files may be gzip-compressed.`,
    query: {
      kind: { description: 'what the body holds (default text)', schema: z.enum(['text', 'images']), example: 'text' },
      name: { description: 'a name to show (at most 80 characters)', schema: z.string().max(80), example: 'my corpus' },
    },
    body: { description: 'the file', content: { 'text/plain': 'text', 'application/octet-stream': 'binary', 'multipart/form-data': 'binary' } },
    ok: { status: 201, description: 'the stored dataset: name it in a job\'s `upload`', content: json(z.strictObject({ dataset: uploadBody })) },
    errors: ['bad_request', 'too_large', 'capacity'],
  },
  {
    method: 'GET', path: '/api/datasets', auth: 'researcher', summary: 'The uploaded datasets',
    ok: { status: 200, description: 'the uploads', content: json(z.strictObject({ datasets: z.array(uploadBody) })) }, errors: [],
  },
  {
    method: 'GET', path: '/datasets/fashion-mnist/{file}', auth: 'public', summary: 'One of Fashion-MNIST\'s four IDX files, gzip-compressed',
    params: { file: { description: 'the file\'s name', schema: z.string().regex(/^[\w.-]+\.gz$/), example: 't10k-labels-idx1-ubyte.gz' } },
    ok: { status: 200, description: 'the file', content: { 'application/gzip': 'binary' } }, errors: ['unknown_job'],
  },
];
