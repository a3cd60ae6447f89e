// The researcher dashboard: token sign-in, the job list (with jobs picked for comparison), the new-job
// form (job-form.ts), runs compared (compare.ts), and a live job page (charts, figures, worker table,
// stop, downloads) fed by the /dashboard Socket.IO namespace.
import {
  NAMESPACES, PROTOCOL_VERSION, bitsPerByte, describeLinks, summarizeLinks, targetStepsOf, type Ack, type JobSummary, type MetricPoint, type WorkerRow,
} from '@tabfleet/protocol';
import { io, type Socket } from 'socket.io-client';
import { $, esc } from '../shared/dom';
import { formatBytes, formatDuration, formatModel } from '../shared/format';
import { drawLineChart } from './chart';
import { evaluationsBySync } from './evaluations';
import { COMPARE_LIMIT, createCompareView } from './compare';
import { comparedIds } from './compare-data';
import { faultRows, latestGroups } from './groups-faults';
import { wireJobForm } from './job-form';
import { wireSampleBox } from './sample';
import { wireUploads } from './uploads';

const TOKEN_KEY = 'tabfleet-token';

/**
 * The sign-in link carries the token in the fragment (`#token=`; `?token=` works too): take it once,
 * keep it for this tab only, and remove it from the address bar and the history entry.
 */
function tokenFromAddress(): string | null {
  const query = new URLSearchParams(location.search), fragment = new URLSearchParams(location.hash.slice(1));
  const found = fragment.get('token') ?? query.get('token');
  if (found === null) return null;
  query.delete('token');
  const rest = query.toString();
  history.replaceState(null, '', `${location.pathname}${rest ? `?${rest}` : ''}${fragment.has('token') ? '' : location.hash}`);
  return found;
}

let token = tokenFromAddress() ?? sessionStorage.getItem(TOKEN_KEY) ?? '';
let socket: Socket | null = null;
const jobs = new Map<string, JobSummary>();
/** The sync of the accuracy each job's row shows (job:metrics). */
const accuracySeq = new Map<string, number>();
let current: { id: string; points: MetricPoint[]; workers: WorkerRow[] } | null = null;

/** Jobs ticked in the list for comparison, in the order ticked. */
const picked = new Set<string>();
const compare = createCompareView({ api, job: (id) => jobs.get(id) });
const VIEWS = ['jobs-view', 'job-view', 'compare-view'] as const;

/** Shows one of the signed-in views and hides the others. */
function showView(view: (typeof VIEWS)[number]): void {
  for (const id of VIEWS) $(id).hidden = id !== view;
}

const isActive = (j: JobSummary) => j.state === 'running' || j.state === 'waiting';

async function api(path: string, init: RequestInit = {}): Promise<Response> {
  // A form (an image upload) sets its own multipart content type, boundary included.
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (!(init.body instanceof FormData)) headers['content-type'] = 'application/json';
  return fetch(path, { ...init, headers: { ...headers, ...(init.headers as Record<string, string> | undefined) } });
}

// ---------- sign-in and the live connection ----------

function showSignIn(message?: string): void {
  for (const id of VIEWS) $(id).hidden = true;
  $('signin').hidden = false;
  $('signin-error').hidden = !message;
  $('signin-error').textContent = message ?? '';
}

function connect(): void {
  socket?.close();
  socket = io(`${location.origin}${NAMESPACES.dashboard}`, { auth: { protocol: PROTOCOL_VERSION, token }, transports: ['websocket'] });
  socket.on('connect_error', (e: Error & { data?: { code?: string } }) => {
    if (e.data?.code === 'unauthorized' || e.data?.code === 'protocol_version') {
      sessionStorage.removeItem(TOKEN_KEY);
      socket?.close();
      showSignIn(e.data.code === 'unauthorized' ? 'That token is not right.' : e.message);
    } else $('conn').textContent = `reconnecting… (${e.message})`;
  });
  socket.on('connect', async () => {
    sessionStorage.setItem(TOKEN_KEY, token);
    $('signin').hidden = true;
    $('conn').textContent = 'live';
    const ack = (await socket!.emitWithAck('subscribe', {})) as Ack<{ jobs: JobSummary[] }>;
    if (ack.ok) for (const j of ack.jobs) jobs.set(j.id, j);
    route();
  });
  socket.on('disconnect', () => ($('conn').textContent = 'offline, reconnecting…'));
  socket.on('job:update', (j: JobSummary) => {
    jobs.set(j.id, j);
    compare.changed(j.id);
    if (current?.id === j.id) renderJob();
    else renderJobs();
  });
  socket.on('job:metrics', (m: { jobId: string; points: MetricPoint[] }) => {
    const job = jobs.get(m.jobId);
    // By sync: an evaluation recorded after a newer sync's (a slow evaluator) does not replace it.
    for (const p of m.points) {
      if (!job || p.accuracy === null || p.seq < (accuracySeq.get(m.jobId) ?? -1)) continue;
      job.latestAccuracy = p.accuracy;
      accuracySeq.set(m.jobId, p.seq);
    }
    compare.changed(m.jobId);
    if (current?.id !== m.jobId) renderJobs();
    if (current?.id === m.jobId) {
      current.points.push(...m.points);
      renderJob();
    }
  });
  socket.on('job:workers', (w: { jobId: string; workers: WorkerRow[] }) => {
    if (current?.id !== w.jobId) return;
    current.workers = w.workers;
    renderWorkers();
  });
}

$('signin-form').addEventListener('submit', (e) => {
  e.preventDefault();
  token = $<HTMLInputElement>('token').value.trim();
  connect();
});

// ---------- routing ----------

async function route(): Promise<void> {
  const m = /^#\/jobs\/([\w-]+)$/.exec(location.hash);
  if (current && (!m || m[1] !== current.id)) await socket?.emitWithAck('unsubscribe', { jobId: current.id });
  const comparing = comparedIds(location.hash, COMPARE_LIMIT);
  if (!comparing) compare.close();
  if (m) await openJob(m[1]);
  else if (comparing) {
    current = null;
    showView('compare-view');
    await compare.open(comparing);
  } else {
    current = null;
    showView('jobs-view');
    renderJobs();
  }
}
addEventListener('hashchange', () => void route());

function renderJobs(): void {
  const rows = [...jobs.values()].sort((a, b) => b.createdAt - a.createdAt).map((j) => {
    const acc = j.latestAccuracy;
    const box = `<input type="checkbox" data-compare="${esc(j.id)}" aria-label="compare ${esc(j.name)}"${picked.has(j.id) ? ' checked' : ''} />`;
    return `<tr data-job="${esc(j.id)}"><td>${box}</td><td><a href="#/jobs/${esc(j.id)}">${esc(j.name)}</a></td><td class="state-${j.state}">${j.state}</td><td>${esc(formatModel(j.spec))}</td>
      <td>${esc(j.spec.strategy)}${j.spec.compression !== 'none' ? ` + ${esc(j.spec.compression)}` : ''}</td><td>${j.step}/${targetStepsOf(j.spec)}</td><td>${j.workers}</td>`
      + `<td data-accuracy>${acc === null ? '—' : `${(100 * acc).toFixed(2)}%`}</td></tr>`;
  });
  $('jobs').querySelector('tbody')!.innerHTML = rows.join('') || '<tr><td colspan="8" class="muted">No jobs yet: submit one below.</td></tr>';
  renderPicked();
}

/** The compare button names how many jobs are ticked, and needs two. */
function renderPicked(): void {
  const button = $<HTMLButtonElement>('compare-picked');
  button.disabled = picked.size < 2;
  button.textContent = picked.size > COMPARE_LIMIT ? `Compare (at most ${COMPARE_LIMIT} at once)` : `Compare picked runs${picked.size ? ` (${picked.size})` : ''}`;
  if (picked.size > COMPARE_LIMIT) button.disabled = true;
}

$('jobs').addEventListener('change', (e) => {
  const box = e.target as HTMLInputElement;
  if (!box.dataset.compare) return;
  if (box.checked) picked.add(box.dataset.compare);
  else picked.delete(box.dataset.compare);
  renderPicked();
});
$('compare-picked').addEventListener('click', () => {
  location.hash = `#/compare/${[...picked].map(encodeURIComponent).join(',')}`;
});

// ---------- the job form ----------

wireJobForm(api, (job) => {
  jobs.set(job.id, job);
  location.hash = `#/jobs/${job.id}`;
});

// ---------- one job, live ----------

async function openJob(id: string): Promise<void> {
  const ack = (await socket!.emitWithAck('subscribe', { jobId: id })) as Ack<{ job: JobSummary; metrics: MetricPoint[]; workers: WorkerRow[] }>;
  if (!ack.ok) {
    location.hash = '#/';
    return;
  }
  jobs.set(id, ack.job);
  current = { id, points: ack.metrics, workers: ack.workers };
  showView('job-view');
  renderJob();
  renderWorkers();
}

function renderJob(): void {
  if (!current) return;
  const j = jobs.get(current.id)!;
  $('job-title').textContent = j.name;
  $('job-summary').innerHTML = `<span class="state-${j.state}">${j.state}</span> · ${esc(formatModel(j.spec))} on ${esc(j.spec.dataset)}`
    + ` · ${esc(j.spec.strategy)} (H ${j.spec.H})`
    + (j.spec.compression !== 'none' ? ` · ${esc(j.spec.compression)}${j.spec.compression === 'dgc' ? ` ${(100 * j.spec.sparsity).toFixed(2)}% sparse` : ''}` : '')
    + ` · ${j.spec.trust === 'untrusted' ? `untrusted, ${esc(j.spec.aggregation)}` : 'trusted, ring mean'}`
    + (j.spec.pacing !== 'fixed' ? ` · ${esc(j.spec.pacing)}` : '')
    + (j.spec.groupSize
      ? ` · Moshpit groups of ${j.spec.groupSize}${j.spec.hierarchical ? ', tabs of one address together' : ''}${j.spec.regionalGroups ? ', by region' : ''}`
      : '')
    + (j.endReason ? ` · ${esc(j.endReason)}` : '')
    + (j.notice ? ` · ${esc(j.notice)}` : '');
  $('sync-time').textContent = syncTimeText(j);
  // A finished job has nothing to stop: no button, not a greyed one.
  $('stop').hidden = !isActive(j);
  $<HTMLAnchorElement>('contributors-page').href = `/apps/volunteer/contributors.html?job=${encodeURIComponent(j.id)}`;
  $('download-checkpoint').hidden = !j.latestCheckpoint;
  $('sample-box').hidden = !j.spec.tokenizer;
  const pts = current.points;
  const losses = pts.filter((p) => p.loss !== null && p.samplesPerSec !== null).map((p) => ({ x: p.step, y: p.loss! }));
  const evals = evaluationsBySync(pts);
  drawLineChart($('loss-chart') as unknown as SVGSVGElement, losses, { yMin: 0 });
  // A language model is judged by its loss on held-out text; a classifier by its test accuracy.
  const text = !!j.spec.tokenizer;
  $('eval-caption').textContent = text ? 'validation loss (nats per token)' : 'test accuracy';
  drawLineChart($('acc-chart') as unknown as SVGSVGElement, evals.map((p) => ({ x: p.step, y: text ? p.loss ?? 0 : p.accuracy! })),
    text ? { yMin: 0, color: '#3fb950' } : { yMin: 0, yMax: 1, format: (y) => `${(100 * y).toFixed(0)}%`, color: '#3fb950' });
  const last = [...pts].reverse().find((p) => p.samplesPerSec !== null);
  // Several members evaluate each evaluated sync; the figure is the lower median of those that agree.
  const lastEval = evals.at(-1);
  const sent = pts.reduce((s, p) => s + (p.bytesSent ?? 0), 0);
  const rows: [string, string][] = [
    ['step', `${j.step} of ${targetStepsOf(j.spec)}`], ['syncs', String(j.seq)], ['workers', String(j.workers)],
    ['throughput', last ? `${last.samplesPerSec!.toFixed(0)} samples/s` : '—'],
    ['bytes on the wire (all workers)', formatBytes(sent)],
    ...(text ? languageFigures(j.spec, lastEval) : [['test accuracy', lastEval ? `${(100 * lastEval.accuracy!).toFixed(2)}%${vouched(lastEval.vouchers)}` : '—'] as [string, string]]),
    ['latest checkpoint', j.latestCheckpoint ? `sync ${j.latestCheckpoint.seq}, ${formatBytes(j.latestCheckpoint.bytes)}` : '—'],
  ];
  $('figures').querySelector('tbody')!.innerHTML = rows.map(([k, v]) => `<tr><td>${k}</td><td data-figure="${esc(k)}">${esc(v)}</td></tr>`).join('');
}

/** Bytes per token of a served text under GPT-2's tokenizer, by its /datasets path, once fetched. */
const bytesPerToken = new Map<string, number | 'pending'>();

function gpt2BytesPerToken(spec: JobSummary['spec']): number | undefined {
  const path = spec.dataset === 'fortunes' ? 'fortunes' : spec.dataset === 'text-upload' ? `uploads/${spec.upload}` : null;
  if (spec.tokenizer !== 'gpt2' || !path) return undefined;
  const known = bytesPerToken.get(path);
  if (known === undefined) {
    bytesPerToken.set(path, 'pending');
    void api(`/datasets/${path}/info?tokenizer=gpt2`).then(async (res) => {
      if (!res.ok) return bytesPerToken.delete(path);
      bytesPerToken.set(path, (await res.json()).bytesPerToken);
      renderJob();
    });
  }
  return typeof known === 'number' ? known : undefined;
}

/** Validation loss, bits per byte (comparable across tokenizers) and next-token accuracy. */
function languageFigures(spec: JobSummary['spec'], p: MetricPoint | undefined): [string, string][] {
  if (!p || p.loss === null) return [['validation loss', '—']];
  const bpb = bitsPerByte(p.loss, spec.tokenizer!, gpt2BytesPerToken(spec));
  return [
    ['validation loss', `${p.loss.toFixed(3)} nats per token${vouched(p.vouchers)}`],
    ['bits per byte', bpb === null ? '… (asking the server for the text\'s bytes per token)' : bpb.toFixed(3)],
    ['next-token accuracy', `${(100 * p.accuracy!).toFixed(2)}%`],
  ];
}

function vouched(n: number | null | undefined): string {
  return n ? ` (${n} ${n === 1 ? 'member' : 'members'} vouch)` : '';
}

function reputation(r: WorkerRow['reputation']): string {
  if (!r) return '—';
  const faults = r.faults ? `, ${r.faults} ${r.faults === 1 ? 'fault' : 'faults'}` : '';
  return `${r.verified} verified${faults}${r.probation ? ' (probation)' : ''}`;
}

/** The server's sync-time prediction beside what happened, so the model can be seen to be right or wrong. */
function syncTimeText(j: JobSummary): string {
  const t = j.syncTime;
  if (!t || (t.nextPredictedMs === null && !t.last) || j.state !== 'running') return '';
  const parts = [];
  if (t.nextPredictedMs !== null) parts.push(`next sync predicted ${formatDuration(t.nextPredictedMs)}`);
  if (t.last) parts.push(`last predicted ${formatDuration(t.last.predictedMs)}, took ${formatDuration(t.last.actualMs)}`);
  if (t.medianError !== null) parts.push(`median error ${(100 * t.medianError).toFixed(0)}%`);
  if (t.auto) {
    const e = t.auto.exchangeMs;
    const measured = [e.f32 === null ? '' : `fp32 ${formatDuration(e.f32)}`, e.f16 === null ? '' : `fp16 ${formatDuration(e.f16)}`].filter(Boolean).join(', ');
    parts.push(`auto: H ${t.auto.H} at ${t.auto.dtype === 'f16' ? 'fp16' : 'fp32'}${measured ? ` (exchange measured ${measured})` : ''}`);
  }
  return `Sync time: ${parts.join('; ')}.`;
}

/** A paced member's pace cell: ms per step, steps per sync, share of the sync's samples. */
function pace(p: WorkerRow['pace']): string {
  if (!p) return '—';
  return `${p.msPerStep === null ? '? ms' : `${p.msPerStep.toFixed(0)} ms`}/step · ${p.steps} steps${p.share === null ? '' : ` · ${(100 * p.share).toFixed(0)}%`}`;
}

/** How a worker's last round travelled, beside its number: star rounds go through the server. */
function roundMode(mode: WorkerRow['lastRoundMode']): string {
  return mode === 'star' ? ' · star, through the server' : mode ? ` · ${mode}` : '';
}

function renderWorkers(): void {
  if (!current) return;
  const job = jobs.get(current.id);
  const byId = new Map(current.workers.map((w) => [w.volunteerId, w]));
  const rows = current.workers.map((w) => {
    const left = w.state === 'left';
    const reverse = (peer: string) => byId.get(peer)?.links?.find((l) => l.peer === w.volunteerId);
    // A joiner's load on a slow link can take minutes: what it has downloaded so far shows it moving.
    const joining = w.admitted || left ? '' : ` (joining${w.downloadedBytes ? `, ${formatBytes(w.downloadedBytes)} downloaded` : ''})`;
    return `<tr class="${left ? 'left' : ''}" data-state="${esc(w.state)}"><td>${esc(w.contributor)}<br><span class="muted">${esc(w.volunteerId)}</span></td><td>${esc(w.adapter)}</td>
    <td>${esc(w.state)}${joining}${w.hidden && !left ? ' · background tab' : ''}</td><td class="num">${w.step}</td><td class="num">${w.syncs}</td>
    <td class="num">${left ? '—' : w.samplesPerSec.toFixed(0)}</td><td data-pace>${pace(w.pace)}</td>`
      + `<td class="num" data-sent>${formatBytes(w.bytesSent)}</td><td class="num">${formatBytes(w.bytesReceived)}</td>
    <td data-round-mode="${w.lastRoundMode ?? ''}">${w.lastRound ?? '—'}${roundMode(w.lastRoundMode)}</td><td>${w.lastRoundMs === null ? '—' : `${w.lastRoundMs} ms/round`}</td>`
        + `<td data-path>${esc(w.links ? describeLinks(w.links, reverse) : '—')}</td>`
      + `<td class="num" data-faults>${w.faults ?? '—'}</td><td data-reputation>${reputation(w.reputation)}</td></tr>`;
  });
  // Peer links that do not open (NATs without a TURN server) leave syncs to the server: said once, above the table.
  const star = current.workers.filter((w) => w.state !== 'left' && w.lastRoundMode === 'star').length;
  $('sync-path').hidden = star === 0;
  $('sync-path').textContent = star ? 'The last sync went through the server (a star round): peer links between the members did not open.' : '';
  const empty = job && !isActive(job) ? 'Nobody trained this job.' : 'No workers yet.';
  $('workers').querySelector('tbody')!.innerHTML = rows.join('') || `<tr><td colspan="14" class="muted">${empty}</td></tr>`;
  $('link-summary').textContent = linkSummaryText(current.workers);
  renderChecks(current.workers);
}

/** An untrusted Moshpit job's groups at the latest sync, and the members removed for faults. */
function renderChecks(workers: WorkerRow[]): void {
  const g = latestGroups(workers);
  const name = (m: { volunteerId: string; contributor: string }) => `${m.contributor} (${m.volunteerId})`;
  $('groups-box').hidden = !g;
  $('groups-caption').textContent = g
    ? `Sync ${g.seq}: ${g.groups.length} of ${g.of} groups committed.${g.outside.length ? ` In none of them: ${g.outside.map(name).join(', ')}.` : ''}`
    : '';
  $('groups').innerHTML = (g?.groups ?? []).map((x) => `<li data-group="${x.index}" data-members="${esc(x.members.map((m) => m.volunteerId).join(' '))}">`
    + `group ${x.index + 1}: ${esc(x.members.map(name).join(', '))}</li>`).join('');
  const faults = faultRows(workers);
  $('faults-box').hidden = faults.length === 0;
  $('faults').innerHTML = faults.map((f) => `<li data-fault="${esc(f.volunteerId)}" data-member="${f.member}">${esc(name(f))}: `
    + `${f.faults} ${f.faults === 1 ? 'fault' : 'faults'}${f.lastFault ? `, the last: ${esc(f.lastFault)}` : ''}`
    + ` · ${f.member ? 'a member again (after its keep-out)' : `left${f.leftReason && f.leftReason !== f.lastFault ? `: ${esc(f.leftReason)}` : ''}`}</li>`).join('');
}

/** The share of the members' links that go through TURN, each link once (as the job summary's `links`). */
function linkSummaryText(workers: WorkerRow[]): string {
  const live = new Set(workers.filter((w) => w.links).map((w) => w.volunteerId));
  const s = summarizeLinks(workers.filter((w) => w.links).map((w) => ({ volunteerId: w.volunteerId, links: w.links! })), (id) => live.has(id));
  if (!s.total) return '';
  const protocols = Object.entries(s.relayProtocols).filter(([, n]) => n > 0).map(([p, n]) => `${n} over ${p}`).join(', ');
  return `Links: ${s.total} between members, ${s.relayed} relayed (${(100 * s.relayedShare!).toFixed(0)}%)${protocols ? `: ${protocols}` : ''}, `
    + `${s.direct} direct (${s.byKind.host} host, ${s.byKind.srflx + s.byKind.prflx} through NATs).`;
}

/** Downloads with the token in a header (never in a link), saved through a short-lived blob URL. */
async function download(path: string, filename: string): Promise<void> {
  const res = await api(path);
  if (!res.ok) {
    alert(`Download failed: HTTP ${res.status}`);
    return;
  }
  const named = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') ?? '')?.[1];
  const href = URL.createObjectURL(await res.blob());
  const a = Object.assign(document.createElement('a'), { href, download: named ?? filename });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(href), 60_000);
}

$('download-checkpoint').addEventListener('click', (e) => {
  e.preventDefault();
  if (current) void download(`/api/jobs/${current.id}/checkpoint`, `${current.id}.safetensors`);
});
$('download-csv').addEventListener('click', (e) => {
  e.preventDefault();
  if (current) void download(`/api/jobs/${current.id}/metrics.csv`, `${current.id}-metrics.csv`);
});

wireUploads(api);

wireSampleBox(() => (current ? jobs.get(current.id) ?? null : null), api);

$('stop').addEventListener('click', async () => {
  if (!current || !confirm('Stop this job? Its workers are released.')) return;
  const res = await api(`/api/jobs/${current.id}/stop`, { method: 'POST' });
  if (res.ok) jobs.set(current.id, (await res.json()).job);
  renderJob();
});

if (token) connect();
else showSignIn();
