// The contribute page: one button lends this tab's GPU to whichever job needs it. The engine (WebGPU
// device, model, data) runs in a Web Worker; this thread holds the Socket.IO session, the WebRTC
// links to ring neighbours and the UI. Tests and `npm run workers` drive it via window.tabfleetVolunteer.
// Before anything runs the page says who runs the server, which job the tab would join and what that
// costs; the volunteer's credit (counted by the server, kept under this browser's id) shows below.
import { createBrowserWebRtcTransport } from '@tabfleet/collective/webrtc-browser';
import { NAMESPACES, PROTOCOL_VERSION, type Ack, type CapabilitiesInput, type PublicInfo, type PublicJob, type VolunteerCredit } from '@tabfleet/protocol';
import { VolunteerRuntime, type RuntimeStatus } from '@tabfleet/worker/runtime';
import { Comlink, startEngineWorker } from '@tabfleet/worker/client';
import type { BackendChoice, BackendInfo } from '@tabfleet/worker';
import { io, type Socket } from 'socket.io-client';
import { $, esc, kvRows } from '../shared/dom';
import { formatBytes, formatCount, formatDuration } from '../shared/format';
import { clientId, saveName, savedName } from './identity';
import { followLifecycle, holdHeadline } from './lifecycle';

const params = new URLSearchParams(location.search);
const { engine } = startEngineWorker();
let runtime: VolunteerRuntime | null = null;
let socket: Socket | null = null;
let info: BackendInfo | null = null;
let serverInfo: PublicInfo | null = null;
const myId = clientId();
/** How often the page refreshes the job it would join (before) and its credit (while contributing). */
const REFRESH_MS = 5_000;

const HEADLINES: Record<RuntimeStatus['state'], string> = {
  connecting: 'Connecting to the server…', idle: 'Waiting for a job that needs a GPU…', loading: 'Loading the model and data…',
  training: 'Training: your GPU is computing.', syncing: 'Averaging with the other volunteers…', paused: 'Paused. Nothing is running.',
  recovering: 'The GPU was reset: recreating the device, then rejoining the job…', stopped: 'Stopped.',
};

function render(s: RuntimeStatus): void {
  const headline = $('headline');
  headline.textContent = (s.state === 'paused' || s.state === 'recovering' ? holdHeadline(s) : null) ?? HEADLINES[s.state];
  headline.dataset.state = s.state;
  headline.dataset.held = s.held.join(',');
  const job = serverInfo?.jobs.find((j) => j.id === s.jobId);
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
  if (s.hidden) rows.push(['tab', 'in the background: the browser may slow it down or freeze it']);
  $('stats').querySelector('tbody')!.innerHTML = kvRows(rows);
  if (s.jobId) showContributorsLink(s.jobId);
  $('error').hidden = !s.lastError;
  $('error').textContent = s.lastError ?? '';
}

function showContributorsLink(jobId: string): void {
  $<HTMLAnchorElement>('contributors-href').href = `./contributors.html?job=${encodeURIComponent(jobId)}`;
  $('contributors-link').hidden = false;
}

// ---------- before contributing: the server, the job this tab would join, what it costs ----------

/** The job the scheduler would hand this tab: the named one, else the first open one its adapter can hold. */
function jobToJoin(jobs: PublicJob[]): PublicJob | undefined {
  const current = runtime?.status.jobId;
  if (current && jobs.some((j) => j.id === current)) return jobs.find((j) => j.id === current);
  const wanted = params.get('job');
  if (wanted) return jobs.find((j) => j.id === wanted);
  const room = info?.adapter?.maxStorageBufferBindingSize ?? Infinity;
  return jobs.find((j) => j.workers < j.maxWorkers && j.modelBytes <= room);
}

function renderPlan(): void {
  if (!serverInfo) return;
  const { name, operator } = serverInfo.server;
  $('server').innerHTML = `Server <strong>${esc(name)}</strong>${operator ? `, run by <strong>${esc(operator)}</strong>` : ' (its operator gave no name)'}.`;
  const job = jobToJoin(serverInfo.jobs);
  const open = serverInfo.jobs.length;
  const joining = runtime?.status.jobId === job?.id ? 'This tab is in' : runtime ? 'This tab joins' : 'Pressing Contribute joins';
  $('next-job').innerHTML = job
    ? `${joining} <strong>${esc(job.name)}</strong>: ${esc(job.preset)} on ${esc(job.dataset)}, ${esc(job.strategy)}${job.compression !== 'none' ? ` + ${esc(job.compression)}` : ''}, ` +
      `${job.workers} of up to ${job.maxWorkers} volunteers, step ${formatCount(job.step)} of ${formatCount(job.targetSteps)}.` +
      (open > 1 ? ` <span class="muted">(${open} open jobs)</span>` : '')
    : params.get('job') ? `Job ${esc(params.get('job'))} is not open to volunteers.`
    : open ? `The ${open} open job${open > 1 ? 's are' : ' is'} full or too large for this adapter: the tab will wait for room.`
    : 'No job needs volunteers right now: a tab that contributes waits until one does.';
  const rows: [string, string][] = [['GPU', info ? info.description + (info.kind === 'cpu' ? ' (CPU fallback, slow)' : '') : 'checking…']];
  if (job) {
    rows.push(['model in GPU memory', formatBytes(job.modelBytes)]);
    rows.push(['sent per sync', `${job.syncBytesMeasured ? '' : 'about '}${formatBytes(job.syncBytes)} ${job.syncBytesMeasured ? '(measured at the last sync)' : '(estimate)'}, as much received`]);
    rows.push(['data', `${esc(job.dataset)} shard, downloaded once`]);
  }
  $('uses').querySelector('tbody')!.innerHTML = kvRows(rows);
}

async function refreshPlan(): Promise<void> {
  try {
    const res = await fetch('/api/public/info');
    if (res.ok) serverInfo = await res.json();
  } catch {
    /* offline for a moment: the next refresh tries again */
  }
  renderPlan();
}

async function refreshCredit(): Promise<void> {
  const res = await fetch('/api/public/credit', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ clientId: myId }) }).catch(() => null);
  if (!res?.ok) return;
  const credit = (await res.json()).credit as VolunteerCredit | null;
  $('credit-section').hidden = !credit || credit.syncs === 0;
  if (!credit) return;
  $('credit').querySelector('tbody')!.innerHTML = kvRows([
    ['syncs', formatCount(credit.syncs)],
    ['training examples', formatCount(credit.samples)],
    ['compute time', formatDuration(credit.computeMs)],
    ['jobs', formatCount(credit.jobs)],
    ['shown as', credit.displayName ?? 'anonymous (set a name above to appear by name)'],
  ]);
}

async function initBackend(choice: BackendChoice): Promise<BackendInfo> {
  // A browser without WebGPU has no navigator.gpu on the page (nor in workers).
  if (choice === 'webgpu' && !('gpu' in navigator && navigator.gpu)) {
    throw new Error('This browser does not offer WebGPU (navigator.gpu is missing): use a recent Chrome, Edge or Safari, or enable WebGPU');
  }
  // `?gpuMemory=MiB` caps what the tab allows itself on the GPU (default: from navigator.deviceMemory);
  // `?slowdown=F` (1–64) makes it F times slower, sleeping beside its compute: tests of unequal volunteers.
  const slowdown = Number(params.get('slowdown'));
  info = await engine.init(choice, { gpuMemoryMiB: Number(params.get('gpuMemory')) || undefined, slowdown: slowdown >= 1 && slowdown <= 64 ? slowdown : undefined });
  renderPlan();
  return info;
}

function capabilities(b: BackendInfo): CapabilitiesInput {
  const a = b.adapter;
  return {
    backend: b.kind,
    adapter: { vendor: a?.vendor ?? '', architecture: a?.architecture ?? '', device: a?.device ?? '', description: a?.description ?? b.description, isCpu: a?.isCpu ?? true },
    // The CPU fallback keeps everything in JS arrays: no binding limit beyond memory.
    limits: { maxStorageBufferBindingSize: a?.maxStorageBufferBindingSize ?? 2 ** 31, maxBufferSize: a?.maxBufferSize ?? 2 ** 31 },
    features: a?.features ?? [],
    userAgent: navigator.userAgent.slice(0, 256),
    ...(regionHint() ? { region: regionHint() } : {}),
  };
}

/** Where this tab is, for jobs that group volunteers by region: `?region=`, else its time zone's area ("Europe/Berlin": Europe). */
function regionHint(): string | undefined {
  const given = new URLSearchParams(location.search).get('region') ?? Intl.DateTimeFormat().resolvedOptions().timeZone?.split('/')[0];
  return given && /^[A-Za-z0-9_\-/]{1,64}$/.test(given) ? given : undefined;
}

/** Starts contributing (the button). */
async function start(): Promise<void> {
  if (runtime || !info) return;
  const name = savedName();
  socket = io(`${location.origin}${NAMESPACES.volunteer}`, {
    auth: { protocol: PROTOCOL_VERSION, capabilities: capabilities(info), clientId: myId, ...(name ? { displayName: name } : {}) },
    transports: ['websocket'],
  });
  socket.on('connect_error', (e) => render({ ...(runtime?.status as RuntimeStatus), lastError: `cannot connect: ${e.message}` }));
  const effort = () => Number($<HTMLInputElement>('effort').value);
  runtime = new VolunteerRuntime({
    socket, serverUrl: location.origin, engine, jobId: params.get('job') ?? undefined,
    createTransport: (self, signaler) => createBrowserWebRtcTransport({ self, signaler }),
    // Below 100% the tab rests between syncs in proportion to the work it did.
    throttleMs: () => (effort() >= 100 ? 0 : Math.round(((runtime?.status.samplesPerSec ? 1000 : 200) * (100 - effort())) / effort())),
    onStatus: render,
    log: (l) => console.log(l),
  });
  lifecycle.apply();
  $<HTMLButtonElement>('contribute').hidden = true;
  $('pause').hidden = false;
  renderPlan();
}

async function togglePause(): Promise<void> {
  if (!runtime) return;
  if (runtime.status.held.includes('paused')) {
    runtime.resume();
    $('pause').textContent = 'Pause';
  } else {
    await runtime.pause();
    $('pause').textContent = 'Resume';
  }
}

$('name-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const saved = saveName($<HTMLInputElement>('display-name').value);
  const status = $('name-status');
  status.className = 'error' in saved ? 'error' : 'muted';
  if ('error' in saved) {
    status.textContent = `Not saved: ${saved.error}.`;
    return;
  }
  $<HTMLInputElement>('display-name').value = saved.name ?? '';
  // Connected: the server keeps it now; otherwise it goes with the next connection.
  if (socket?.connected) {
    const ack = (await socket.timeout(10_000).emitWithAck('profile', { displayName: saved.name }).catch((err: Error) => ({ ok: false, error: { message: err.message } }))) as Ack;
    if (!ack.ok) {
      status.className = 'error';
      status.textContent = `The server refused it: ${ack.error.message}`;
      return;
    }
  }
  status.textContent = saved.name ? `Saved: you appear as “${saved.name}”.` : 'Cleared: you appear anonymously.';
  void refreshCredit();
});
$<HTMLInputElement>('display-name').value = savedName() ?? '';
$('contribute').addEventListener('click', () => void start());
$('pause').addEventListener('click', () => void togglePause());
$('effort').addEventListener('input', () => ($('effort-value').textContent = `${$<HTMLInputElement>('effort').value}%`));
$('use-cpu').addEventListener('click', async () => {
  await initBackend('cpu');
  $('nogpu').hidden = true;
  $<HTMLButtonElement>('contribute').disabled = false;
});
// Leaving the page tells the server at once, so the ring re-forms without waiting for a timeout; a
// page the browser restores from its back/forward cache contributes again.
addEventListener('pagehide', () => runtime?.stop('pagehide'));
addEventListener('pageshow', (e: PageTransitionEvent) => {
  if (!e.persisted || runtime?.status.state !== 'stopped') return;
  runtime = null;
  socket = null;
  void start();
});
const lifecycle = followLifecycle(() => runtime, () => $<HTMLInputElement>('allow-battery').checked);
$('allow-battery').addEventListener('change', () => lifecycle.apply());
// A lost GPU device (driver reset, GPU process crash): the engine worker says so; recreate it and rejoin.
void engine.onDeviceLost(Comlink.proxy((reason: string) => {
  const restart = async () => {
    info = await engine.restart();
    renderPlan();
  };
  if (runtime) void runtime.recoverDevice(reason, restart);
  else void restart().catch((e: Error) => console.log(`recreating the GPU device failed: ${e.message}`));
}));

const ready = initBackend(params.get('backend') === 'cpu' ? 'cpu' : 'webgpu').then(
  (b) => {
    $<HTMLButtonElement>('contribute').disabled = false;
    return b;
  },
  (e: Error) => {
    $('uses').dataset.gpu = 'none';
    $('nogpu-why').textContent = `${e.message}. Your tab can still help on the CPU, much more slowly.`;
    $('nogpu').hidden = false;
    return null;
  },
);

void refreshPlan();
void refreshCredit();
setInterval(() => {
  void refreshPlan();
  if (runtime) void refreshCredit();
}, REFRESH_MS);

declare global {
  interface Window {
    tabfleetVolunteer: {
      ready: Promise<BackendInfo | null>; start: typeof start; status(): RuntimeStatus | null; pause(): Promise<void>; resume(): void;
      /** Destroys the engine's GPUDevice, as a driver reset would (the lifecycle tests). */
      loseDevice(): Promise<void>;
    };
  }
}
window.tabfleetVolunteer = {
  ready, start, status: () => (runtime ? { ...runtime.status } : null),
  pause: () => runtime?.pause() ?? Promise.resolve(), resume: () => runtime?.resume(),
  loseDevice: () => engine.loseDevice(),
};
