// What the volunteer page and the embedded contribute frame (apps/embed) share: the engine's backend,
// the capabilities a tab reports, the job it would join, and a contribution itself (the Socket.IO
// session and the VolunteerRuntime over WebRTC, throttled by the "how hard" setting), with the rows
// and headline both pages show and the credit the server counted for this browser.
import { createBrowserWebRtcTransport } from '@tabfleet/collective/webrtc-browser';
import { NAMESPACES, PROTOCOL_VERSION, VOLUNTEER_SOCKET_PATH, type CapabilitiesInput, type PublicInfo, type PublicJob, type VolunteerCredit } from '@tabfleet/protocol';
import { VolunteerRuntime, type RuntimeStatus } from '@tabfleet/worker/runtime';
import { Comlink, type Engine } from '@tabfleet/worker/client';
import type { BackendChoice, BackendInfo } from '@tabfleet/worker';
import { io, type Socket } from 'socket.io-client';
import { $, esc, kvRows } from '../shared/dom';
import { formatBytes, formatCount, formatDuration } from '../shared/format';
import { holdHeadline } from './lifecycle';

const HEADLINES: Record<RuntimeStatus['state'], string> = {
  connecting: 'Connecting to the server…', idle: 'Waiting for a job that needs a GPU…', loading: 'Loading the model and data…',
  training: 'Training: your GPU is computing.', syncing: 'Averaging with the other volunteers…', paused: 'Paused. Nothing is running.',
  recovering: 'The GPU was reset: recreating the device, then rejoining the job…', stopped: 'Stopped.',
};

export function headlineOf(s: RuntimeStatus): string {
  return (s.state === 'paused' || s.state === 'recovering' ? holdHeadline(s) : null) ?? HEADLINES[s.state];
}

/** What the tab is doing, as rows of a key/value table. */
export function statusRows(s: RuntimeStatus, job: PublicJob | undefined): [string, string][] {
  const rows: [string, string][] = [
    ['job', s.jobId ? (job ? `${job.name} (${s.jobId})` : s.jobId) : '—'],
    ['steps done', String(s.step)],
    ['syncs this session', String(s.syncs)],
    ['samples/s', s.samplesPerSec ? s.samplesPerSec.toFixed(0) : '—'],
    ['peers', s.peers.length ? String(s.peers.length) : '—'],
    ['sent / received', `${formatBytes(s.bytesSent)} / ${formatBytes(s.bytesReceived)}`],
  ];
  if (s.lastAccuracy !== null) rows.push(['test accuracy (last check)', `${(100 * s.lastAccuracy).toFixed(2)}%`]);
  if (s.memoryPlan) rows.push(['step plan', s.memoryPlan]);
  // A load over a slow link can take minutes: what has come in so far shows it moving.
  if (s.state === 'loading' && s.downloadedBytes) rows.push(['downloaded so far', formatBytes(s.downloadedBytes)]);
  if (s.hidden) rows.push(['tab', 'in the background: the browser may slow it down or freeze it']);
  return rows;
}

/** Shows the status in the elements both pages have: #headline, #stats (a key/value table) and #error. */
export function renderStatus(s: RuntimeStatus, job: PublicJob | undefined): void {
  const headline = $('headline');
  headline.textContent = headlineOf(s);
  headline.dataset.state = s.state;
  headline.dataset.held = s.held.join(',');
  $('stats').querySelector('tbody')!.innerHTML = kvRows(statusRows(s, job));
  $('error').hidden = !s.lastError;
  $('error').textContent = s.lastError ?? '';
}

/** The job the scheduler would hand this tab: the one it is in, the named one, else the first open one `room` can hold. */
export function jobToJoin(jobs: PublicJob[], opts: { current?: string | null; wanted?: string | null; room?: number }): PublicJob | undefined {
  if (opts.current && jobs.some((j) => j.id === opts.current)) return jobs.find((j) => j.id === opts.current);
  if (opts.wanted) return jobs.find((j) => j.id === opts.wanted);
  return jobs.find((j) => j.workers < j.maxWorkers && j.modelBytes <= (opts.room ?? Infinity));
}

/** Who runs the server, as a sentence of HTML. */
export function serverHtml({ name, operator }: PublicInfo['server']): string {
  return `Server <strong>${esc(name)}</strong>${operator ? `, run by <strong>${esc(operator)}</strong>` : ' (its operator gave no name)'}.`;
}

/** A job as a volunteer sees it before joining, as HTML: name, model and data, strategy, members, progress. */
export function jobHtml(job: PublicJob): string {
  return `<strong>${esc(job.name)}</strong>: ${esc(job.preset)} on ${esc(job.dataset)}, ${esc(job.strategy)}${job.compression !== 'none' ? ` + ${esc(job.compression)}` : ''}, ` +
    `${job.workers} of up to ${job.maxWorkers} volunteers, step ${formatCount(job.step)} of ${formatCount(job.targetSteps)}.`;
}

/** This browser's totals as the server counted them, or null (none yet, or the server did not answer). */
export async function fetchCredit(serverUrl: string, clientId: string): Promise<VolunteerCredit | null> {
  const res = await fetch(`${serverUrl}/api/public/credit`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ clientId }) }).catch(() => null);
  if (!res?.ok) return null;
  return (await res.json()).credit as VolunteerCredit | null;
}

export function creditRows(credit: VolunteerCredit): [string, string][] {
  return [
    ['syncs', formatCount(credit.syncs)],
    ['training examples', formatCount(credit.samples)],
    ['compute time', formatDuration(credit.computeMs)],
    ['jobs', formatCount(credit.jobs)],
    ['shown as', credit.displayName ?? 'anonymous (set a name above to appear by name)'],
  ];
}

/**
 * Creates the engine's device. `gpuMemoryMiB` caps what the tab allows itself on the GPU (default: from
 * navigator.deviceMemory); `slowdown` (1–64) makes it that many times slower (tests of unequal volunteers).
 */
export async function initBackend(engine: Engine, choice: BackendChoice, opts: { gpuMemoryMiB?: number; slowdown?: number } = {}): Promise<BackendInfo> {
  // A browser without WebGPU has no navigator.gpu on the page (nor in workers).
  if (choice === 'webgpu' && !('gpu' in navigator && navigator.gpu)) {
    throw new Error('This browser does not offer WebGPU (navigator.gpu is missing): use a recent Chrome, Edge or Safari, or enable WebGPU');
  }
  const slowdown = opts.slowdown !== undefined && opts.slowdown >= 1 && opts.slowdown <= 64 ? opts.slowdown : undefined;
  return engine.init(choice, { gpuMemoryMiB: opts.gpuMemoryMiB || undefined, slowdown });
}

/** Where this tab is, for jobs that group volunteers by region: `given` (`?region=`), else its time zone's area ("Europe/Berlin": Europe). */
function regionHint(given: string | null): string | undefined {
  const region = given ?? Intl.DateTimeFormat().resolvedOptions().timeZone?.split('/')[0];
  return region && /^[A-Za-z0-9_\-/]{1,64}$/.test(region) ? region : undefined;
}

export function capabilities(b: BackendInfo, region: string | null = null): CapabilitiesInput {
  const a = b.adapter;
  const hint = regionHint(region);
  return {
    backend: b.kind,
    adapter: { vendor: a?.vendor ?? '', architecture: a?.architecture ?? '', device: a?.device ?? '', description: a?.description ?? b.description, isCpu: a?.isCpu ?? true },
    // The CPU fallback keeps everything in JS arrays: no binding limit beyond memory.
    limits: { maxStorageBufferBindingSize: a?.maxStorageBufferBindingSize ?? 2 ** 31, maxBufferSize: a?.maxBufferSize ?? 2 ** 31 },
    features: a?.features ?? [],
    userAgent: navigator.userAgent.slice(0, 256),
    ...(hint ? { region: hint } : {}),
  };
}

export interface ContributionOptions {
  /** The server's origin (the pages are served by it, so `location.origin`). */
  serverUrl: string;
  engine: Engine;
  info: BackendInfo;
  clientId: string;
  displayName: string | null;
  jobId?: string;
  region?: string | null;
  /** The "how hard" setting, 10–100 (%). */
  effort(): number;
  onStatus(s: RuntimeStatus): void;
}

/** Connects to the server and starts the runtime: from here on the tab trains whatever job it is handed. */
export function startContribution(o: ContributionOptions): { socket: Socket; runtime: VolunteerRuntime } {
  const socket = io(`${o.serverUrl}${NAMESPACES.volunteer}`, {
    auth: { protocol: PROTOCOL_VERSION, capabilities: capabilities(o.info, o.region), clientId: o.clientId, ...(o.displayName ? { displayName: o.displayName } : {}) },
    // The lean endpoint: the same namespace without Socket.IO's per-connection server objects.
    path: VOLUNTEER_SOCKET_PATH,
    transports: ['websocket'],
  });
  const runtime: VolunteerRuntime = new VolunteerRuntime({
    socket, serverUrl: o.serverUrl, engine: o.engine, jobId: o.jobId,
    createTransport: (self, signaler, iceServers) => createBrowserWebRtcTransport({ self, signaler, rtcConfig: () => ({ iceServers: iceServers() }) }),
    // Below 100% the tab rests between syncs in proportion to the work it did.
    throttleMs: () => (o.effort() >= 100 ? 0 : Math.round(((runtime.status.samplesPerSec ? 1000 : 200) * (100 - o.effort())) / o.effort())),
    onStatus: o.onStatus,
    log: (l) => console.log(l),
  });
  socket.on('connect_error', (e) => o.onStatus({ ...runtime.status, lastError: `cannot connect: ${e.message}` }));
  return { socket, runtime };
}

/** Pause leaves the job and holds (nothing runs); Resume rejoins. `button` says which comes next. */
export async function togglePause(runtime: VolunteerRuntime, button: HTMLElement): Promise<void> {
  if (runtime.status.held.includes('paused')) {
    runtime.resume();
    button.textContent = 'Pause';
  } else {
    await runtime.pause();
    button.textContent = 'Resume';
  }
}

/**
 * A lost GPU device (driver reset, GPU process crash): the engine worker says so; `restart` recreates
 * the device, and a contributing tab (`current()`) rejoins after it.
 */
export function recoverLostDevice(engine: Engine, current: () => VolunteerRuntime | null, restart: () => Promise<void>): void {
  void engine.onDeviceLost(Comlink.proxy((reason: string) => {
    const runtime = current();
    if (runtime) void runtime.recoverDevice(reason, restart);
    else void restart().catch((e: Error) => console.log(`recreating the GPU device failed: ${e.message}`));
  }));
}
