// The job page's sample box: fetch the latest checkpoint, load it into the job's model in an engine
// Web Worker (WebGPU, or the CPU when this browser has none), and stream the generated text.
import { CHECKPOINT_SYNC_HEADER, type JobSummary } from '@tabfleet/protocol';
import { Comlink, startEngineWorker, type Engine } from '@tabfleet/worker/client';
import { $ } from '../shared/dom';
import { formatBytes } from '../shared/format';

let engine: { api: Engine; label: string } | null = null;
/** The checkpoint the engine holds, so a second sample of the same sync does not download it again. */
let loaded: { jobId: string; seq: number } | null = null;

async function openEngine(): Promise<{ api: Engine; label: string }> {
  if (engine) return engine;
  const { engine: api } = startEngineWorker();
  try {
    const info = await api.init('webgpu');
    engine = { api, label: `WebGPU (${info.adapter?.description || info.adapter?.architecture || 'adapter'})` };
  } catch (e) {
    await api.init('cpu');
    engine = { api, label: `the CPU (no WebGPU here: ${(e as Error).message})` };
  }
  return engine;
}

export function wireSampleBox(job: () => JobSummary | null, api: (path: string) => Promise<Response>): void {
  const form = $('sample-form') as HTMLFormElement;
  const status = $('sample-status'), output = $('sample-output');
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const j = job();
    if (!j) return;
    const button = form.querySelector('button')!;
    const f = new FormData(form);
    const prompt = String(f.get('prompt') ?? '');
    const req = { prompt, length: Number(f.get('length')), temperature: Number(f.get('temperature')), topK: Number(f.get('topK')), seed: Date.now() % 2 ** 31 };
    button.disabled = true;
    output.textContent = prompt;
    try {
      const { api: eng, label } = await openEngine();
      if (!j.latestCheckpoint) throw new Error('no checkpoint yet: the job has not committed a sync');
      if (loaded?.jobId !== j.id || loaded.seq !== j.latestCheckpoint.seq) {
        status.textContent = `downloading the checkpoint (${formatBytes(j.latestCheckpoint.bytes)})…`;
        const res = await api(`/api/jobs/${j.id}/checkpoint`);
        if (!res.ok) throw new Error(`checkpoint download: HTTP ${res.status}`);
        const seq = Number(res.headers.get(CHECKPOINT_SYNC_HEADER));
        const bytes = new Uint8Array(await res.arrayBuffer());
        await eng.loadSampler(j.spec, Comlink.transfer(bytes, [bytes.buffer]));
        loaded = { jobId: j.id, seq };
      }
      status.textContent = `generating on ${label} from sync ${loaded.seq}…`;
      const t0 = performance.now();
      await eng.sample(req, Comlink.proxy((piece: string) => {
        output.textContent += piece;
      }));
      status.textContent = `sync ${loaded.seq}, ${req.length} tokens on ${label} in ${((performance.now() - t0) / 1000).toFixed(1)} s`;
    } catch (err) {
      status.textContent = `sampling failed: ${(err as Error).message}`;
    } finally {
      button.disabled = false;
    }
  });
}
