// The HTTP API: jobs (create, list, detail, stop), metrics as JSON and CSV, rounds, checkpoints as
// safetensors, /healthz, Prometheus /metrics, the Fashion-MNIST files, the API's OpenAPI document and the built apps.
import { METRIC_COLUMNS, ProtocolError, idSchema, type MetricPoint } from '@tabfleet/protocol';
import { existsSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Secrets } from '../auth';
import { isEnded, type JobHub } from '../cluster/hub';
import type { Store } from '../store/store';
import { DownloadSlots, fashionMnistShard, imageUploadShard, imageUploadValidation, sendShard, ShardCache, type Shard } from './datasets';
import { corpusFacts, textParams, textShard, tokenizerParam, validationWindows, type ServedText, type TextLoader } from './text-datasets';
import { MAX_IMAGE_UPLOAD_BYTES, MAX_TEXT_UPLOAD_BYTES } from '@tabfleet/data';
import type { ImageUpload, Uploads } from '../uploads';
import { multipartBoundary, parseMultipart, type FormPart } from './multipart';
import { openApiDocument } from './openapi';
import { CHECKPOINT_UPLOAD_ROUTES, checkModelSize, sendCheckpoint } from './checkpoint-transfer';
import type { CheckpointUploads } from '../checkpoint-uploads';
import { PUBLIC_ROUTES } from './public';
import { readBytes, readJson, sendError, sendJson } from './respond';
import { clientAddress, redactUrl, setEmbedFrameHeaders, setEmbedScriptHeaders, type TrustedProxies } from './security';
import { datasetFile, sendFile, sendFromRoots } from './static';
import type { ServerMetrics } from '../metrics';

export interface RouteContext {
  hub: JobHub;
  store: Store;
  secrets: Secrets;
  nodeId: string;
  startedAt: number;
  /** Built apps (Vite dist/); pages are served when it exists. */
  staticDir: string;
  datasetsDir: string;
  /** Origins besides the server's own whose pages may use it: Socket.IO, and embedding the contribute frame ('*': any). */
  allowOrigins: readonly string[];
  /** Proxies whose X-Forwarded-For names the client (`--trust-proxy`). */
  trustedProxies: TrustedProxies;
  /** Who runs this server, for the volunteer page. */
  identity: { name: string; operator: string | null };
  metrics: ServerMetrics;
  shards: ShardCache;
  shardSlots: DownloadSlots;
  uploads: Uploads;
  /** Checkpoint uploads under way; its maxModelBytes bounds a job's model. */
  checkpointUploads: CheckpointUploads;
  /** Reads the texts the server cuts for jobs (the fortunes corpus, uploads). */
  texts: TextLoader;
  log(line: string): void;
}

export type Route = (ctx: RouteContext, req: IncomingMessage, res: ServerResponse, params: string[], url: URL) => Promise<void>;

/** The researcher token, only from the Authorization header: a token in a URL ends up in histories, logs and Referer headers. */
function requireToken(ctx: RouteContext, req: IncomingMessage): void {
  const header = req.headers.authorization ?? '';
  const token = header.startsWith('Bearer ') ? header.slice(7) : '';
  if (!token || !ctx.secrets.tokenMatches(token)) throw new ProtocolError('unauthorized', 'missing or bad researcher token (Authorization: Bearer <token>)');
}

/** How a text dataset is cut for a job: its tokenizer and its model's context. */
export interface TextCut {
  tokenizer: string;
  context: number;
}

/** What a shard ticket grants: one shard of one dataset (cut one way, for text) dealt with one seed. */
export function shardGrant(dataset: string, index: number, count: number, seed: number, cut?: TextCut): string {
  return `${dataset}${cut ? `:${cut.tokenizer}:${cut.context}` : ''}/${index}/${count}/${seed}`;
}

/** The path (with its ticket) from which a member of `jobId` downloads its shard. */
export function shardPath(secrets: Secrets, jobId: string, dataset: string, index: number, count: number, seed: number, cut?: TextCut): string {
  const ticket = secrets.shardTicket(jobId, shardGrant(dataset, index, count, seed, cut));
  const text = cut ? `&tokenizer=${cut.tokenizer}&context=${cut.context}` : '';
  return `/datasets/${dataset}/shards/${index}/${count}?seed=${seed}${text}&job=${encodeURIComponent(jobId)}&ticket=${ticket}`;
}

/**
 * Sends a shard to a member of an unfinished job that holds its ticket (from the assignment) or to the
 * researcher, at most SHARD_DOWNLOADS_PER_ADDRESS at once per address. A member refused for now waits
 * on the server, not on its own link: its job's coordinator is told, so its load deadline waits too.
 */
async function serveShard(
  ctx: RouteContext, req: IncomingMessage, res: ServerResponse, url: URL, grant: string | null, shard: number, build: () => Promise<Shard>,
): Promise<void> {
  const jobId = url.searchParams.get('job'), ticket = url.searchParams.get('ticket');
  // The job of the member whose ticket this is (null: the researcher, or a public file).
  const memberOf = grant !== null && jobId && ticket && ctx.secrets.shardTicketMatches(jobId, grant, ticket) ? jobId : null;
  if (memberOf) {
    const job = await ctx.store.getJob(memberOf);
    if (!job || isEnded(job)) throw new ProtocolError('unauthorized', `job ${memberOf} has ended: its shards are no longer served`);
  } else if (grant !== null) requireToken(ctx, req);
  const release = ctx.shardSlots.acquire(clientAddress(req, ctx.trustedProxies));
  if (!release) {
    if (memberOf) void ctx.hub.downloadRefused(memberOf, shard).catch(() => {});
    throw new ProtocolError('rate_limited', 'too many shard downloads in flight from this address');
  }
  try {
    sendShard(req, res, await build(), release);
  } catch (e) {
    release();
    throw e;
  }
}

/** An image upload's files from its form parts. */
function imageParts(parts: Map<string, FormPart>): ImageUpload {
  const named = [...parts.keys()].map((n) => JSON.stringify(n)).join(', ') || 'none';
  const safetensors = parts.get('safetensors'), images = parts.get('images'), labels = parts.get('labels');
  if (safetensors && !images && !labels) return { safetensors: safetensors.data };
  if (images && labels && !safetensors) return { images: images.data, labels: labels.data };
  throw new ProtocolError('bad_request', `an image upload's form has the parts "images" and "labels" (IDX files) or one part "safetensors"; this one has ${named}`);
}

/** The upload id when a /datasets/ path names an uploaded image set, else null (a text). */
async function uploadedImages(ctx: RouteContext, dataset: string): Promise<string | null> {
  if (!dataset.startsWith('uploads/')) return null;
  const id = dataset.slice('uploads/'.length);
  return (await ctx.uploads.get(id))?.kind === 'images' ? id : null;
}

export function jobIdParam(raw: string): string {
  let decoded: string;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    throw new ProtocolError('bad_request', 'bad job id');
  }
  const r = idSchema.safeParse(decoded);
  if (!r.success) throw new ProtocolError('bad_request', 'bad job id');
  return r.data;
}

/** The OpenAPI document, built on first request. */
let openApi: ReturnType<typeof openApiDocument> | undefined;

const csvRow = (p: MetricPoint) => `${METRIC_COLUMNS.map((c) => (p[c] == null ? '' : String(p[c]))).join(',')}\n`;

/** Writes `text` and waits for the socket to drain when it asks to. */
async function write(res: ServerResponse, text: string): Promise<void> {
  if (!res.write(text)) await new Promise<void>((r) => { res.once('drain', r); res.once('close', r); });
}

/** Every metric point of a job, read a page at a time and written as it is read (CSV or a JSON object). */
async function streamMetrics(ctx: RouteContext, res: ServerResponse, jobId: string, asCsv: boolean): Promise<void> {
  if (asCsv) res.writeHead(200, { 'content-type': 'text/csv; charset=utf-8', 'content-disposition': `attachment; filename="${jobId}-metrics.csv"`, 'cache-control': 'no-store' });
  else res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  await write(res, asCsv ? `${METRIC_COLUMNS.join(',')}\n` : `{"jobId":${JSON.stringify(jobId)},"points":[`);
  let cursor = 0, first = true;
  for (;;) {
    if (res.destroyed) return;
    const page = await ctx.store.metricsPage(jobId, cursor, METRICS_PAGE_ROWS);
    if (page.points.length) {
      await write(res, asCsv ? page.points.map(csvRow).join('') : `${first ? '' : ','}${page.points.map((p) => JSON.stringify(p)).join(',')}`);
      first = false;
    }
    if (page.next === null) break;
    cursor = page.next;
  }
  res.end(asCsv ? '' : ']}');
}

/** Metric rows read from the store per page of a download. */
const METRICS_PAGE_ROWS = 5_000;

/** Every HTTP route: method, path pattern, handler. api-description.ts describes each (openapi.test.ts checks). */
export const ROUTES: [string, RegExp, Route][] = [
  ...PUBLIC_ROUTES,
  ...CHECKPOINT_UPLOAD_ROUTES,
  ['GET', /^\/api\/openapi\.json$/, async (_ctx, _req, res) => {
    sendJson(res, 200, (openApi ??= openApiDocument()));
  }],
  ['GET', /^\/healthz$/, async (ctx, _req, res) => {
    sendJson(res, 200, { ok: true, node: ctx.nodeId, store: ctx.store.kind, uptimeSec: Math.round((Date.now() - ctx.startedAt) / 1000) });
  }],
  ['GET', /^\/metrics$/, async (ctx, _req, res) => {
    const text = await ctx.metrics.render();
    res.writeHead(200, { 'content-type': ctx.metrics.contentType }).end(text);
  }],
  ['GET', /^\/api\/jobs$/, async (ctx, req, res, _p) => {
    requireToken(ctx, req);
    sendJson(res, 200, { jobs: await ctx.hub.summaries() });
  }],
  ['POST', /^\/api\/jobs$/, async (ctx, req, res, _p) => {
    requireToken(ctx, req);
    sendJson(res, 201, { job: await ctx.hub.createJob(await readJson(req), async (spec) => {
      checkModelSize(spec, ctx.checkpointUploads.maxModelBytes);
      await ctx.uploads.check(spec);
    }) });
  }],
  ['GET', /^\/api\/jobs\/([^/]+)$/, async (ctx, req, res, [id]) => {
    requireToken(ctx, req);
    const jobId = jobIdParam(id);
    sendJson(res, 200, { job: await ctx.hub.summary(jobId), workers: await ctx.hub.workers(jobId) });
  }],
  ['POST', /^\/api\/jobs\/([^/]+)\/stop$/, async (ctx, req, res, [id]) => {
    requireToken(ctx, req);
    sendJson(res, 200, { job: await ctx.hub.stopJob(jobIdParam(id)) });
  }],
  ['GET', /^\/api\/jobs\/([^/]+)\/metrics(\.csv)?$/, async (ctx, req, res, [id, dotCsv], url) => {
    requireToken(ctx, req);
    const jobId = jobIdParam(id);
    await ctx.hub.summary(jobId); // 404 for unknown jobs
    await streamMetrics(ctx, res, jobId, !!dotCsv || url.searchParams.get('format') === 'csv');
  }],
  ['GET', /^\/api\/jobs\/([^/]+)\/rounds$/, async (ctx, req, res, [id]) => {
    requireToken(ctx, req);
    const jobId = jobIdParam(id);
    await ctx.hub.summary(jobId);
    sendJson(res, 200, { jobId, rounds: await ctx.store.listRounds(jobId) });
  }],
  ['GET', /^\/api\/jobs\/([^/]+)\/checkpoint$/, async (ctx, req, res, [id]) => {
    requireToken(ctx, req);
    const jobId = jobIdParam(id);
    const latest = await ctx.store.latestCheckpoint(jobId);
    if (!latest) throw new ProtocolError('unknown_job', `job ${jobId} has no checkpoint yet`);
    await sendCheckpoint(ctx, req, res, jobId, latest.seq);
  }],
  // A volunteer's download of the model it was told to load: the ticket in the URL stands for the token.
  ['GET', /^\/api\/jobs\/([^/]+)\/checkpoints\/(\d{1,9})$/, async (ctx, req, res, [id, seqText], url) => {
    const jobId = jobIdParam(id), seq = Number(seqText);
    const ticket = url.searchParams.get('ticket');
    if (!ticket || !ctx.secrets.ticketMatches(jobId, seq, ticket)) requireToken(ctx, req);
    await sendCheckpoint(ctx, req, res, jobId, seq);
  }],
  // Shard `index` of `count`, dealt by the job's seed (packages/data shardIndices), as safetensors:
  // for members of an unfinished job that uses it (the ticket from their assignment), or the researcher.
  ['GET', /^\/datasets\/fashion-mnist\/shards\/(\d{1,4})\/(\d{1,4})$/, async (ctx, req, res, [indexText, countText], url) => {
    const index = Number(indexText), count = Number(countText), seed = Number(url.searchParams.get('seed') ?? 1);
    await serveShard(ctx, req, res, url, shardGrant('fashion-mnist', index, count, seed), index, () => fashionMnistShard(ctx.shards, ctx.datasetsDir, index, count, seed));
  }],
  // A text's training windows for one member, cut by the job's tokenizer and context (packages/data
  // corpus.ts), or a shard of an uploaded image set's training part.
  ['GET', /^\/datasets\/(fortunes|uploads\/u-[0-9a-f]{12})\/shards\/(\d{1,4})\/(\d{1,4})$/, async (ctx, req, res, [dataset, indexText, countText], url) => {
    const index = Number(indexText), count = Number(countText), seed = Number(url.searchParams.get('seed') ?? 1);
    const images = await uploadedImages(ctx, dataset);
    if (images) {
      await serveShard(ctx, req, res, url, shardGrant(dataset, index, count, seed), index, () => imageUploadShard(ctx.shards, images, () => ctx.uploads.images(images), index, count, seed));
      return;
    }
    const cut = textParams(url);
    const build = () => textShard(ctx.shards, ctx.texts, dataset as ServedText, cut.tokenizer, cut.context, index, count, seed);
    await serveShard(ctx, req, res, url, shardGrant(dataset, index, count, seed, cut), index, build);
  }],
  // The validation windows every evaluator reads, and the text's sizes (bytes per token for bits per
  // byte): public for the fortunes corpus; for an upload, a member's (the ticket of its shard, named by
  // `shard=index/count`) or the researcher's, as the upload is theirs.
  ['GET', /^\/datasets\/(fortunes|uploads\/u-[0-9a-f]{12})\/validation$/, async (ctx, req, res, [dataset], url) => {
    const [index, count] = (url.searchParams.get('shard') ?? '').split('/').map(Number);
    const images = await uploadedImages(ctx, dataset);
    if (images) {
      await serveShard(
        ctx, req, res, url, shardGrant(dataset, index, count, Number(url.searchParams.get('seed') ?? 1)), index,
        () => imageUploadValidation(ctx.shards, images, () => ctx.uploads.images(images)),
      );
      return;
    }
    const cut = textParams(url);
    const grant = dataset === 'fortunes' ? null : shardGrant(dataset, index, count, Number(url.searchParams.get('seed') ?? 1), cut);
    await serveShard(ctx, req, res, url, grant, index, () => validationWindows(ctx.shards, ctx.texts, dataset as ServedText, cut.tokenizer, cut.context));
  }],
  ['GET', /^\/datasets\/(fortunes|uploads\/u-[0-9a-f]{12})\/info$/, async (ctx, req, res, [dataset], url) => {
    if (dataset !== 'fortunes') requireToken(ctx, req);
    sendJson(res, 200, await corpusFacts(ctx.texts, dataset as ServedText, tokenizerParam(url)));
  }],
  // Researchers' own data, checked before anything is stored: `kind=text` (the default), a UTF-8 text
  // as the body; `kind=images`, a safetensors file as the body, or multipart/form-data with the parts
  // `images` and `labels` (an IDX pair) or `safetensors`. Files may be gzip-compressed.
  ['POST', /^\/api\/datasets$/, async (ctx, req, res, _p, url) => {
    requireToken(ctx, req);
    const kind = url.searchParams.get('kind') ?? 'text';
    if (kind !== 'text' && kind !== 'images') throw new ProtocolError('bad_request', `kind must be text or images (got ${JSON.stringify(kind)})`);
    const name = (url.searchParams.get('name') ?? '').trim().slice(0, 80) || (kind === 'text' ? 'uploaded text' : 'uploaded images');
    if (kind === 'text') {
      const bytes = await readBytes(req, MAX_TEXT_UPLOAD_BYTES, 'a text upload');
      sendJson(res, 201, { dataset: await ctx.uploads.addText(name, bytes, Date.now()) });
      return;
    }
    const boundary = multipartBoundary(req.headers['content-type']);
    const body = await readBytes(req, MAX_IMAGE_UPLOAD_BYTES + (boundary ? 64 * 1024 : 0), 'an image upload');
    sendJson(res, 201, { dataset: await ctx.uploads.addImages(name, boundary ? imageParts(parseMultipart(body, boundary)) : { safetensors: body }, Date.now()) });
  }],
  ['GET', /^\/api\/datasets$/, async (ctx, req, res) => {
    requireToken(ctx, req);
    sendJson(res, 200, { datasets: await ctx.uploads.list() });
  }],
  ['GET', /^\/datasets\/fashion-mnist\/([\w.-]+\.gz)$/, async (ctx, _req, res, [name]) => {
    const file = datasetFile(ctx.datasetsDir, name);
    if (!file || !sendFile(res, file)) throw new ProtocolError('unknown_job', `no dataset file ${name}`);
  }],
];

/** Handles a request, or returns false when no API route matches (Socket.IO and static files then). */
export async function handleApi(ctx: RouteContext, req: IncomingMessage, res: ServerResponse): Promise<boolean> {
  const url = new URL(req.url ?? '/', 'http://local');
  for (const [method, pattern, route] of ROUTES) {
    const m = pattern.exec(url.pathname);
    if (!m) continue;
    if (req.method !== method && !(method === 'GET' && req.method === 'HEAD')) continue;
    try {
      await route(ctx, req, res, m.slice(1), url);
    } catch (e) {
      if (!(e instanceof ProtocolError)) ctx.log(`HTTP ${req.method} ${url.pathname} failed: ${(e as Error).stack ?? e}`);
      if (!res.headersSent) sendError(res, e);
    }
    return true;
  }
  if (url.pathname.startsWith('/api/')) {
    sendJson(res, 404, { error: { code: 'bad_request', message: `no route ${req.method} ${url.pathname}` } });
    return true;
  }
  return false;
}

/** Where the built contribute frame (apps/embed/index.html) and the embed script (`tabfleet.js`) are served. */
export const EMBED_FRAME_PATH = '/apps/embed/';
export const EMBED_SCRIPT_DIR = '/embed/';

/** Serves the built apps from the static directory; `/` goes to the volunteer page. */
export function handleStatic(ctx: RouteContext, req: IncomingMessage, res: ServerResponse): void {
  let path: string;
  try {
    path = decodeURIComponent(new URL(req.url ?? '/', 'http://local').pathname);
  } catch {
    ctx.log(`HTTP ${req.method} ${redactUrl(req.url).slice(0, 200)}: malformed URI`);
    sendError(res, new ProtocolError('bad_request', 'malformed URI'));
    return;
  }
  if (path === '/') {
    res.writeHead(302, { location: '/apps/volunteer/' }).end();
    return;
  }
  // The contribute widget: the frame may be embedded by the allowed origins, its script loaded by any.
  if (path.startsWith(EMBED_FRAME_PATH)) setEmbedFrameHeaders(res, ctx.allowOrigins);
  else if (path.startsWith(EMBED_SCRIPT_DIR)) setEmbedScriptHeaders(res);
  if (sendFromRoots([ctx.staticDir], path, res)) return;
  res.writeHead(404, { 'content-type': 'text/plain' }).end(`not found: ${path}${existsSync(ctx.staticDir) ? '' : ' (the apps are not built: run npm run build)'}`);
}
