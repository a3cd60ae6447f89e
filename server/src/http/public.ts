// Read-only routes that need no researcher token: what the volunteer page shows before anyone
// contributes (who runs the server, which job a new volunteer would join, what it costs), a job's
// public contributor list, and a browser's own credit (asked for with its client id in the body, so
// the id stays out of URLs and logs).
import {
  creditRequestSchema,
  estimateSyncBytes,
  parseEvent,
  flatLengthOf,
  targetStepsOf,
  type EmbedPermission,
  type JobSummary,
  type PublicContributors,
  type PublicInfo,
  type PublicJob,
} from '@tabfleet/protocol';
import { inOfferOrder, isEnded } from '../cluster/hub';
import { publicContributor } from '../credit';
import type { Store } from '../store/store';
import { readJson, sendJson } from './respond';
import { originAllowed } from './security';
import { jobIdParam, type Route } from './routes';

/** Metric points looked back over for the last sync's bytes (evaluations in between have none). */
const RECENT_POINTS = 16;

async function publicJob(store: Store, j: JobSummary): Promise<PublicJob> {
  const recent = await store.metrics(j.id, RECENT_POINTS);
  const lastSync = [...recent].reverse().find((p) => p.bytesSent !== null && p.workers > 0);
  return {
    id: j.id, name: j.name, state: j.state, preset: j.spec.preset, dataset: j.spec.dataset, strategy: j.spec.strategy, compression: j.spec.compression,
    workers: j.workers, minWorkers: j.spec.minWorkers, maxWorkers: j.spec.maxWorkers, step: j.step, targetSteps: targetStepsOf(j.spec),
    modelBytes: flatLengthOf(j.spec) * 4,
    syncBytes: lastSync ? Math.round(lastSync.bytesSent! / lastSync.workers) : estimateSyncBytes(j.spec, Math.max(j.workers + 1, j.spec.minWorkers)),
    syncBytesMeasured: !!lastSync,
    latestAccuracy: j.latestAccuracy,
  };
}

export const PUBLIC_ROUTES: [string, RegExp, Route][] = [
  ['GET', /^\/api\/public\/info$/, async (ctx, _req, res) => {
    // Ended jobs are left out before their summaries are read: there may be many.
    const live = await Promise.all((await ctx.store.listJobs()).filter((j) => !isEnded(j)).map((j) => ctx.hub.summary(j.id).catch(() => null)));
    const open = inOfferOrder(live.filter((j): j is JobSummary => j !== null && !isEnded(j)));
    const body: PublicInfo = { server: ctx.identity, jobs: await Promise.all(open.map((j) => publicJob(ctx.store, j))) };
    sendJson(res, 200, body);
  }],
  ['GET', /^\/api\/public\/jobs\/([^/]+)\/contributors$/, async (ctx, _req, res, [id]) => {
    const j = await ctx.hub.summary(jobIdParam(id));
    const records = (await ctx.store.contributors(j.id)).filter((c) => c.syncs > 0);
    const names = await ctx.store.displayNames(records.map((c) => c.clientId));
    const contributors = records.map((c) => publicContributor(c, names.get(c.clientId))).sort((a, b) => b.samples - a.samples || a.firstAt - b.firstAt);
    const body: PublicContributors = { job: { id: j.id, name: j.name, state: j.state, preset: j.spec.preset, dataset: j.spec.dataset, strategy: j.spec.strategy }, contributors };
    sendJson(res, 200, body);
  }],
  ['GET', /^\/api\/public\/embed$/, async (ctx, req, res) => {
    // Read by the widget's element on the embedding page: any origin may, and the answer depends on it.
    res.setHeader('access-control-allow-origin', '*');
    res.setHeader('vary', 'Origin');
    const body: EmbedPermission = { allowed: originAllowed(req, ctx.allowOrigins), origin: req.headers.origin ?? null, server: ctx.identity };
    sendJson(res, 200, body);
  }],
  ['POST', /^\/api\/public\/credit$/, async (ctx, req, res) => {
    const { clientId } = parseEvent(creditRequestSchema, await readJson(req), 'credit request');
    sendJson(res, 200, { credit: await ctx.store.volunteerCredit(clientId) });
  }],
];
