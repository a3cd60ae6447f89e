// The contribute page: one button lends this tab's GPU to whichever job needs it. The engine (WebGPU
// device, model, data) runs in a Web Worker; this thread holds the Socket.IO session, the WebRTC
// links to ring neighbours and the UI. Tests and `npm run workers` drive it via window.tabfleetVolunteer.
import { createBrowserWebRtcTransport } from '@tabfleet/collective/webrtc-browser';
import { NAMESPACES, PROTOCOL_VERSION, type CapabilitiesInput } from '@tabfleet/protocol';
import { VolunteerRuntime, type RuntimeStatus } from '@tabfleet/worker/runtime';
import { startEngineWorker } from '@tabfleet/worker/client';
import type { BackendChoice, BackendInfo } from '@tabfleet/worker';
import { io } from 'socket.io-client';

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const params = new URLSearchParams(location.search);
const { engine } = startEngineWorker();
let runtime: VolunteerRuntime | null = null;
let info: BackendInfo | null = null;

function fmtBytes(n: number): string {
  return n < 1e3 ? `${n} B` : n < 1e6 ? `${(n / 1e3).toFixed(1)} kB` : n < 1e9 ? `${(n / 1e6).toFixed(1)} MB` : `${(n / 1e9).toFixed(2)} GB`;
}

const HEADLINES: Record<RuntimeStatus['state'], string> = {
  connecting: 'Connecting to the server…', idle: 'Waiting for a job that needs a GPU…', loading: 'Loading the model and data…',
  training: 'Training: your GPU is computing.', syncing: 'Averaging with the other volunteers…', paused: 'Paused. Nothing is running.', stopped: 'Stopped.',
};

function render(s: RuntimeStatus): void {
  $('headline').textContent = HEADLINES[s.state];
  const rows: [string, string][] = [
    ['job', s.jobId ?? '—'],
    ['steps done', String(s.step)],
    ['syncs credited', String(s.syncs)],
    ['samples/s', s.samplesPerSec ? s.samplesPerSec.toFixed(0) : '—'],
    ['peers', s.peers.length ? String(s.peers.length) : '—'],
    ['sent / received', `${fmtBytes(s.bytesSent)} / ${fmtBytes(s.bytesReceived)}`],
  ];
  if (s.lastAccuracy !== null) rows.push(['test accuracy (last check)', `${(100 * s.lastAccuracy).toFixed(2)}%`]);
  $('stats').querySelector('tbody')!.innerHTML = rows.map(([k, v]) => `<tr><td>${k}</td><td>${v}</td></tr>`).join('');
  $('error').hidden = !s.lastError;
  $('error').textContent = s.lastError ?? '';
}

async function initBackend(choice: BackendChoice): Promise<BackendInfo> {
  // A browser without WebGPU has no navigator.gpu on the page (nor in workers).
  if (choice === 'webgpu' && !('gpu' in navigator && navigator.gpu)) throw new Error('This browser does not offer WebGPU (navigator.gpu is missing): use a recent Chrome, Edge or Safari, or enable WebGPU');
  info = await engine.init(choice);
  $('adapter').textContent = info.kind === 'cpu' ? `CPU fallback: ${info.description}. Slow, and no GPU is used.` : `GPU: ${info.description}`;
  return info;
}

function capabilities(b: BackendInfo): CapabilitiesInput {
  const a = b.adapter;
  return {
    backend: b.kind,
    adapter: { vendor: a?.vendor ?? '', architecture: a?.architecture ?? '', device: a?.device ?? '', description: a?.description ?? b.description, isCpu: a?.isCpu ?? true },
    // The CPU fallback keeps everything in JS arrays: no binding limit beyond memory.
    limits: { maxStorageBufferBindingSize: a?.maxStorageBufferBindingSize ?? 2 ** 31, maxBufferSize: a?.maxStorageBufferBindingSize ?? 2 ** 31 },
    features: a?.features ?? [],
    userAgent: navigator.userAgent.slice(0, 256),
  };
}

/** Starts contributing (the button). */
async function start(): Promise<void> {
  if (runtime || !info) return;
  const socket = io(`${location.origin}${NAMESPACES.volunteer}`, { auth: { protocol: PROTOCOL_VERSION, capabilities: capabilities(info) }, transports: ['websocket'] });
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
  $<HTMLButtonElement>('contribute').hidden = true;
  $('pause').hidden = false;
}

async function togglePause(): Promise<void> {
  if (!runtime) return;
  if (runtime.status.state === 'paused') {
    runtime.resume();
    $('pause').textContent = 'Pause';
  } else {
    await runtime.pause();
    $('pause').textContent = 'Resume';
  }
}

$('contribute').addEventListener('click', () => void start());
$('pause').addEventListener('click', () => void togglePause());
$('effort').addEventListener('input', () => ($('effort-value').textContent = `${$<HTMLInputElement>('effort').value}%`));
$('use-cpu').addEventListener('click', async () => {
  await initBackend('cpu');
  $('nogpu').hidden = true;
  $<HTMLButtonElement>('contribute').disabled = false;
});
// Leaving the page tells the server at once, so the ring re-forms without waiting for a timeout.
addEventListener('pagehide', () => runtime?.stop('pagehide'));

const ready = initBackend(params.get('backend') === 'cpu' ? 'cpu' : 'webgpu').then(
  (b) => {
    $<HTMLButtonElement>('contribute').disabled = false;
    return b;
  },
  (e: Error) => {
    $('adapter').textContent = 'No WebGPU in this browser.';
    $('nogpu-why').textContent = `${e.message}. Your tab can still help on the CPU, much more slowly.`;
    $('nogpu').hidden = false;
    return null;
  },
);

declare global {
  interface Window {
    tabfleetVolunteer: { ready: Promise<BackendInfo | null>; start: typeof start; status(): RuntimeStatus | null; pause(): Promise<void>; resume(): void };
  }
}
window.tabfleetVolunteer = {
  ready, start, status: () => (runtime ? { ...runtime.status } : null),
  pause: () => runtime?.pause() ?? Promise.resolve(), resume: () => runtime?.resume(),
};
