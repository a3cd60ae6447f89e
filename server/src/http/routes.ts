// The HTTP API: jobs (create, list, detail, stop), metrics as JSON and CSV, rounds, checkpoints as
// safetensors, /healthz, Prometheus /metrics, the Fashion-MNIST files and the built apps.
import { CHECKPOINT_SYNC_HEADER, LIMITS, METRIC_COLUMNS, ProtocolError, idSchema, type MetricPoint } from '@tabfleet/protocol';
import { existsSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Secrets } from '../auth';
import type { JobHub } from '../cluster/hub';
import type { Store } from '../store/store';
import { fashionMnistShard } from './datasets';
import { PUBLIC_ROUTES } from './public';
import { readJson, sendBytes, sendError, sendJson } from './respond';
import { datasetFile, sendFile, sendFromRoots } from './static';

export interface RouteContext {
  hub: JobHub;
  store: Store;
  secrets: Secrets;
  nodeId: string;
  startedAt: number;
  /** Built apps (Vite dist/); pages are served when it exists. */
  staticDir: string;
  datasetsDir: string;
  /** Who runs this server, for the volunteer page. */
  identity: { name: string; operator: string | null };
  prometheus(): Promise<string>;
}

export type Route = (ctx: RouteContext, req: IncomingMessage, res: ServerResponse, params: string[], url: URL) => Promise<void>;

function requireToken(ctx: RouteContext, req: IncomingMessage, url: URL): void {
  const header = req.headers.authorization ?? '';
  const token = header.startsWith('Bearer ') ? header.slice(7) : url.searchParams.get('token') ?? '';
  if (!token || !ctx.secrets.tokenMatches(token)) throw new ProtocolError('unauthorized', 'missing or bad researcher token (Authorization: Bearer <token>)');
}

export function jobIdParam(raw: string): string {
  const r = idSchema.safeParse(decodeURIComponent(raw));
  if (!r.success) throw new ProtocolError('bad_request', 'bad job id');
  return r.data;
}

function csv(points: MetricPoint[]): string {
  const rows = points.map((p) => METRIC_COLUMNS.map((c) => (p[c] === null ? '' : String(p[c]))).join(','));
  return `${METRIC_COLUMNS.join(',')}\n${rows.join('\n')}${rows.length ? '\n' : ''}`;
}

async function sendCheckpoint(ctx: RouteContext, res: ServerResponse, jobId: string, seq: number): Promise<void> {
  const bytes = await ctx.store.readCheckpoint(jobId, seq);
  if (!bytes) throw new ProtocolError('unknown_job', `job ${jobId} has no checkpoint of sync ${seq}`);
  // The sync travels with the bytes: a client that asked for "the latest" knows which one it got.
  res.setHeader(CHECKPOINT_SYNC_HEADER, String(seq));
  sendBytes(res, 'application/octet-stream', bytes, `${jobId}-sync${seq}.safetensors`);
}

const ROUTES: [string, RegExp, Route][] = [
  ...PUBLIC_ROUTES,
  ['GET', /^\/healthz$/, async (ctx, _req, res) => {
    sendJson(res, 200, { ok: true, node: ctx.nodeId, store: ctx.store.kind, uptimeSec: Math.round((Date.now() - ctx.startedAt) / 1000) });
  }],
  ['GET', /^\/metrics$/, async (ctx, _req, res) => {
    const text = await ctx.prometheus();
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(text);
  }],
  ['GET', /^\/api\/jobs$/, async (ctx, req, res, _p, url) => {
    requireToken(ctx, req, url);
    sendJson(res, 200, { jobs: await ctx.hub.summaries() });
  }],
  ['POST', /^\/api\/jobs$/, async (ctx, req, res, _p, url) => {
    requireToken(ctx, req, url);
    sendJson(res, 201, { job: await ctx.hub.createJob(await readJson(req)) });
  }],
  ['GET', /^\/api\/jobs\/([^/]+)$/, async (ctx, req, res, [id], url) => {
    requireToken(ctx, req, url);
    const jobId = jobIdParam(id);
    sendJson(res, 200, { job: await ctx.hub.summary(jobId), workers: await ctx.hub.workers(jobId) });
  }],
  ['POST', /^\/api\/jobs\/([^/]+)\/stop$/, async (ctx, req, res, [id], url) => {
    requireToken(ctx, req, url);
    sendJson(res, 200, { job: await ctx.hub.stopJob(jobIdParam(id)) });
  }],
  ['GET', /^\/api\/jobs\/([^/]+)\/metrics(\.csv)?$/, async (ctx, req, res, [id, dotCsv], url) => {
    requireToken(ctx, req, url);
    const jobId = jobIdParam(id);
    await ctx.hub.summary(jobId); // 404 for unknown jobs
    const points = await ctx.store.metrics(jobId, LIMITS.maxMetricsRows);
    if (dotCsv || url.searchParams.get('format') === 'csv') {
      res.writeHead(200, { 'content-type': 'text/csv; charset=utf-8', 'content-disposition': `attachment; filename="${jobId}-metrics.csv"` }).end(csv(points));
    } else sendJson(res, 200, { jobId, points });
  }],
  ['GET', /^\/api\/jobs\/([^/]+)\/rounds$/, async (ctx, req, res, [id], url) => {
    requireToken(ctx, req, url);
    const jobId = jobIdParam(id);
    await ctx.hub.summary(jobId);
    sendJson(res, 200, { jobId, rounds: await ctx.store.listRounds(jobId) });
  }],
  ['GET', /^\/api\/jobs\/([^/]+)\/checkpoint$/, async (ctx, req, res, [id], url) => {
    requireToken(ctx, req, url);
    const jobId = jobIdParam(id);
    const latest = await ctx.store.latestCheckpoint(jobId);
    if (!latest) throw new ProtocolError('unknown_job', `job ${jobId} has no checkpoint yet`);
    await sendCheckpoint(ctx, res, jobId, latest.seq);
  }],
  // A volunteer's download of the model it was told to load: the ticket in the URL stands for the token.
  ['GET', /^\/api\/jobs\/([^/]+)\/checkpoints\/(\d{1,9})$/, async (ctx, req, res, [id, seqText], url) => {
    const jobId = jobIdParam(id), seq = Number(seqText);
    const ticket = url.searchParams.get('ticket');
    if (!ticket || !ctx.secrets.ticketMatches(jobId, seq, ticket)) requireToken(ctx, req, url);
    await sendCheckpoint(ctx, res, jobId, seq);
  }],
  // Shard `index` of `count`, dealt by the job's seed (packages/data shardIndices), as safetensors.
  ['GET', /^\/datasets\/fashion-mnist\/shards\/(\d{1,4})\/(\d{1,4})$/, async (ctx, _req, res, [index, count], url) => {
    const bytes = await fashionMnistShard(ctx.datasetsDir, Number(index), Number(count), Number(url.searchParams.get('seed') ?? 1));
    sendBytes(res, 'application/octet-stream', bytes);
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
      if (!(e instanceof ProtocolError)) console.error(`HTTP ${req.method} ${url.pathname}:`, e);
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

/** Serves the built apps from the static directory; `/` goes to the volunteer page. */
export function handleStatic(ctx: RouteContext, req: IncomingMessage, res: ServerResponse): void {
  const path = decodeURIComponent(new URL(req.url ?? '/', 'http://local').pathname);
  if (path === '/') {
    res.writeHead(302, { location: '/apps/volunteer/' }).end();
    return;
  }
  if (sendFromRoots([ctx.staticDir], path, res)) return;
  res.writeHead(404, { 'content-type': 'text/plain' }).end(`not found: ${path}${existsSync(ctx.staticDir) ? '' : ' (the apps are not built: run npm run build)'}`);
}
