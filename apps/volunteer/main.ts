// The contribute page: one button lends this tab's GPU to whichever job needs it. The engine (WebGPU
// device, model, data) runs in a Web Worker; this thread holds the Socket.IO session, the WebRTC
// links to ring neighbours and the UI. Tests and `npm run workers` drive it via window.tabfleetVolunteer.
// Before anything runs the page says who runs the server, which job the tab would join and what that
// costs; the volunteer's credit (counted by the server, kept under this browser's id) shows below.
import type { Ack, PublicInfo, PublicJob } from '@tabfleet/protocol';
import type { RuntimeStatus, VolunteerRuntime } from '@tabfleet/worker/runtime';
import { startEngineWorker } from '@tabfleet/worker/client';
import type { BackendChoice, BackendInfo } from '@tabfleet/worker';
import type { Socket } from 'socket.io-client';
import { $, esc, kvRows } from '../shared/dom';
import { formatBytes } from '../shared/format';
import {
  creditRows, fetchCredit, initBackend as initEngine, jobHtml, jobToJoin as scheduledJob, recoverLostDevice, renderStatus, serverHtml, startContribution, togglePause,
} from './contribution';
import { clientId, saveName, savedName } from './identity';
import { followLifecycle } from './lifecycle';

const params = new URLSearchParams(location.search);
const { engine } = startEngineWorker();
let runtime: VolunteerRuntime | null = null;
let socket: Socket | null = null;
let info: BackendInfo | null = null;
let serverInfo: PublicInfo | null = null;
const myId = clientId();
/** How often the page refreshes the job it would join (before) and its credit (while contributing). */
const REFRESH_MS = 5_000;

function render(s: RuntimeStatus): void {
  renderStatus(s, serverInfo?.jobs.find((j) => j.id === s.jobId));
  if (s.jobId) showContributorsLink(s.jobId);
}

function showContributorsLink(jobId: string): void {
  $<HTMLAnchorElement>('contributors-href').href = `./contributors.html?job=${encodeURIComponent(jobId)}`;
  $('contributors-link').hidden = false;
}

// ---------- before contributing: the server, the job this tab would join, what it costs ----------

/** The job the scheduler would hand this tab: the named one, else the first open one its adapter can hold. */
function jobToJoin(jobs: PublicJob[]): PublicJob | undefined {
  return scheduledJob(jobs, { current: runtime?.status.jobId, wanted: params.get('job'), room: info?.adapter?.maxStorageBufferBindingSize });
}

function renderPlan(): void {
  if (!serverInfo) return;
  $('server').innerHTML = serverHtml(serverInfo.server);
  const job = jobToJoin(serverInfo.jobs);
  const open = serverInfo.jobs.length;
  const joining = runtime?.status.jobId === job?.id ? 'This tab is in' : runtime ? 'This tab joins' : 'Pressing Contribute joins';
  $('next-job').innerHTML = job
    ? `${joining} ${jobHtml(job)}` +
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
  const credit = await fetchCredit(location.origin, myId);
  $('credit-section').hidden = !credit || credit.syncs === 0;
  if (credit) $('credit').querySelector('tbody')!.innerHTML = kvRows(creditRows(credit));
}

async function initBackend(choice: BackendChoice): Promise<BackendInfo> {
  // `?gpuMemory=MiB` caps what the tab allows itself on the GPU; `?slowdown=F` (1–64) makes it F times slower.
  info = await initEngine(engine, choice, { gpuMemoryMiB: Number(params.get('gpuMemory')), slowdown: Number(params.get('slowdown')) });
  renderPlan();
  return info;
}

/** Starts contributing (the button). */
async function start(): Promise<void> {
  if (runtime || !info) return;
  ({ socket, runtime } = startContribution({
    serverUrl: location.origin, engine, info, clientId: myId, displayName: savedName(), jobId: params.get('job') ?? undefined, region: params.get('region'),
    effort: () => Number($<HTMLInputElement>('effort').value), onStatus: render,
  }));
  lifecycle.apply();
  $<HTMLButtonElement>('contribute').hidden = true;
  $('pause').hidden = false;
  renderPlan();
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
$('pause').addEventListener('click', () => runtime && void togglePause(runtime, $('pause')));
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
recoverLostDevice(engine, () => runtime, async () => {
  info = await engine.restart();
  renderPlan();
});

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
