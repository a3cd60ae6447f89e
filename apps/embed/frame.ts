// The contribute frame that <tabfleet-contribute> (element.ts) puts on other sites, served from the
// server's origin. It is the volunteer page's engine, runtime, lifecycle and battery rules
// (../volunteer/contribution.ts, lifecycle.ts) behind one consent: before the visitor's own click on
// Contribute in this frame, it only reads the public info (which job a click would join); no engine
// worker, no WebGPU device, no socket, no id in storage. The id it credits is the volunteer page's
// (../volunteer/identity.ts) in this origin's storage, not the embedding site's: the site can neither
// read nor set it (it would be a key to the visitor's credit and public name), and browsers that
// partition third-party storage keep one per embedding site, so it tracks no one across sites. A
// browser that blocks third-party storage is obeyed, not worked around: the id lasts for the visit,
// and the frame says so. Tests read `window.tabfleetEmbed`.
import type { PublicInfo } from '@tabfleet/protocol';
import type { RuntimeStatus, VolunteerRuntime } from '@tabfleet/worker/runtime';
import { startEngineWorker, type Engine } from '@tabfleet/worker/client';
import type { BackendChoice, BackendInfo } from '@tabfleet/worker';
import { $, kvRows } from '../shared/dom';
import {
  creditRows, fetchCredit, initBackend, jobHtml, jobToJoin, recoverLostDevice, renderStatus, serverHtml, startContribution, togglePause,
} from '../volunteer/contribution';
import { clientId, identityKept, savedName } from '../volunteer/identity';
import { followLifecycle } from '../volunteer/lifecycle';

const wantedJob = new URLSearchParams(location.search).get('job');
/** How often the frame refreshes the job it would join (before) and its credit (while contributing). */
const REFRESH_MS = 5_000;
let serverInfo: PublicInfo | null = null;
let engine: Engine | null = null;
let info: BackendInfo | null = null;
let runtime: VolunteerRuntime | null = null;
let myId: string | null = null;

const render = (s: RuntimeStatus) => renderStatus(s, serverInfo?.jobs.find((j) => j.id === s.jobId));

function renderPlan(): void {
  if (!serverInfo) return;
  $('server').innerHTML = serverHtml(serverInfo.server);
  const job = jobToJoin(serverInfo.jobs, { current: runtime?.status.jobId, wanted: wantedJob, room: info?.adapter?.maxStorageBufferBindingSize });
  $('next-job').innerHTML = job
    ? `${runtime?.status.jobId === job.id ? 'This tab is in' : runtime ? 'This tab joins' : 'Pressing Contribute joins'} ${jobHtml(job)}`
    : 'No job needs volunteers right now: a tab that contributes waits until one does.';
}

async function refresh(): Promise<void> {
  const res = await fetch('/api/public/info').catch(() => null);
  if (res?.ok) serverInfo = await res.json();
  renderPlan();
  if (!myId) return;
  const credit = await fetchCredit(location.origin, myId);
  $('credit').hidden = !credit || credit.syncs === 0;
  if (credit) $('credit').querySelector('tbody')!.innerHTML = kvRows([['your contribution', 'counted by the server'], ...creditRows(credit).slice(0, 3)]);
}

let lifecycle: { apply(): void } | null = null;

/** The visitor agreed: from here on the tab trains. `choice` is the CPU fallback when WebGPU is missing. */
async function start(choice: BackendChoice): Promise<void> {
  if (runtime) return;
  if (!engine) {
    engine = startEngineWorker().engine;
    const e = engine;
    recoverLostDevice(e, () => runtime, async () => {
      info = await e.restart();
    });
  }
  $<HTMLButtonElement>('contribute').disabled = true;
  try {
    info = await initBackend(engine, choice);
  } catch (e) {
    $('nogpu-why').textContent = `${(e as Error).message}. Your tab can still help on the CPU, much more slowly.`;
    $('nogpu').hidden = false;
    return;
  }
  myId = clientId();
  $('visit-only').hidden = identityKept();
  ({ runtime } = startContribution({
    serverUrl: location.origin, engine, info, clientId: myId, displayName: savedName(), jobId: wantedJob ?? undefined,
    effort: () => Number($<HTMLInputElement>('effort').value), onStatus: render,
  }));
  lifecycle ??= followLifecycle(() => runtime, () => $<HTMLInputElement>('allow-battery').checked);
  lifecycle.apply();
  $('contribute').hidden = true;
  $('nogpu').hidden = true;
  $('consent').hidden = true;
  $('pause').hidden = false;
  renderPlan();
}

// Only the visitor's own click counts: a script cannot make an event with isTrusted set.
$('contribute').addEventListener('click', (e) => e.isTrusted && void start('webgpu'));
$('use-cpu').addEventListener('click', (e) => e.isTrusted && void start('cpu'));
$('pause').addEventListener('click', () => runtime && void togglePause(runtime, $('pause')));
$('effort').addEventListener('input', () => ($('effort-value').textContent = `${$<HTMLInputElement>('effort').value}%`));
$('allow-battery').addEventListener('change', () => lifecycle?.apply());
// Leaving the page tells the server at once, so the ring re-forms without waiting for a timeout.
addEventListener('pagehide', () => runtime?.stop('pagehide'));
// The embedding element sizes the frame to its content.
// (Its content's height, not the document's, which is never less than the frame's current height.)
const content = document.querySelector('main')!;
new ResizeObserver(() => parent.postMessage({ tabfleet: 'height', px: content.getBoundingClientRect().height + 2 }, '*')).observe(content);

void refresh();
setInterval(() => void refresh(), REFRESH_MS);

declare global {
  interface Window {
    tabfleetEmbed: { status(): RuntimeStatus | null; started(): boolean; backend(): BackendInfo['kind'] | null; clientId(): string | null };
  }
}
window.tabfleetEmbed = { status: () => (runtime ? { ...runtime.status } : null), started: () => engine !== null, backend: () => info?.kind ?? null, clientId: () => myId };
