// The researcher's own data: upload a text file or an image set (the server checks it and says what
// is wrong), list what is uploaded, and offer the uploads of the job's kind to the job form.
import { $, esc } from '../shared/dom';
import { formatBytes } from '../shared/format';
import type { UploadInfo } from '@tabfleet/protocol';

const records = (d: UploadInfo) => `${d.records.train + d.records.validation} ${d.kind === 'text' ? 'paragraphs' : 'images'}, ${d.records.validation} held out for validation`;

/** The uploads the job form offers: those of the kind its dataset reads. */
export function showUploadChoice(dataset: unknown): void {
  const kind = dataset === 'image-upload' ? 'images' : 'text';
  $('upload-choice').hidden = dataset !== 'text-upload' && dataset !== 'image-upload';
  const choice = document.querySelector<HTMLSelectElement>('#job-form select[name=upload]')!;
  for (const o of choice.options) o.hidden = o.disabled = o.dataset.kind !== kind;
  if (choice.selectedOptions[0]?.disabled !== false) choice.value = [...choice.options].find((o) => !o.disabled)?.value ?? '';
}

/** An image set's request: a safetensors file as the body, or an IDX pair as a form. */
function imageBody(file: File, labels: File | undefined): RequestInit | string {
  if (/\.safetensors(\.gz)?$/i.test(file.name)) return { body: file, headers: { 'content-type': 'application/octet-stream' } };
  if (!labels) return 'an IDX images file goes with its IDX labels file: choose both (or one .safetensors file)';
  const form = new FormData();
  form.set('images', file, file.name);
  form.set('labels', labels, labels.name);
  return { body: form };
}

export function wireUploads(api: (path: string, init?: RequestInit) => Promise<Response>): void {
  const form = $('upload-form') as HTMLFormElement;
  const status = $('upload-status');
  const kindOf = () => String(new FormData(form).get('uploadKind') ?? 'text');
  form.addEventListener('input', () => ($('upload-labels-field').hidden = kindOf() !== 'images'));

  async function refresh(select?: string): Promise<void> {
    const res = await api('/api/datasets');
    if (!res.ok) return;
    const { datasets } = (await res.json()) as { datasets: UploadInfo[] };
    $('uploads').innerHTML = datasets.map((d) => `<li data-upload="${esc(d.id)}">${esc(d.name)} · ${esc(d.id)} · ${d.kind} · ${formatBytes(d.bytes)}, ${records(d)}</li>`).join('');
    const choice = document.querySelector<HTMLSelectElement>('#job-form select[name=upload]')!;
    choice.innerHTML = datasets.map((d) => `<option value="${esc(d.id)}" data-kind="${d.kind}">${esc(d.name)} (${d.kind}, ${formatBytes(d.bytes)})</option>`).join('');
    if (select) choice.value = select;
    showUploadChoice(new FormData($('job-form') as HTMLFormElement).get('dataset'));
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const file = ($('upload-file') as HTMLInputElement).files?.[0];
    const kind = kindOf();
    const fail = (message: string) => {
      status.textContent = `not stored: ${message}`;
      status.classList.add('error');
    };
    if (!file) return fail(`choose ${kind === 'text' ? 'a text file' : 'a safetensors file or an IDX pair'} first`);
    const init = kind === 'text' ? { body: file, headers: { 'content-type': 'text/plain' } } : imageBody(file, ($('upload-labels') as HTMLInputElement).files?.[0]);
    if (typeof init === 'string') return fail(init);
    const name = String(new FormData(form).get('uploadName') ?? '').trim() || file.name;
    status.textContent = `uploading ${file.name} (${formatBytes(file.size)})…`;
    status.classList.remove('error');
    const res = await api(`/api/datasets?kind=${kind}&name=${encodeURIComponent(name)}`, { method: 'POST', ...init });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) return fail(body.error?.message ?? `HTTP ${res.status}`);
    const d = body.dataset as UploadInfo;
    status.textContent = `stored ${d.name} as ${d.id}: ${records(d)}`;
    await refresh(d.id);
  });
  void refresh();
}
