// The researcher's own data: upload a text file (the server checks it and says what is wrong), list
// what is uploaded, and offer it to the job form.
import { $, esc } from '../shared/dom';
import { formatBytes } from '../shared/format';

interface UploadInfo {
  id: string;
  name: string;
  bytes: number;
  records: { train: number; validation: number };
}

export function wireUploads(api: (path: string, init?: RequestInit) => Promise<Response>): void {
  const form = $('upload-form') as HTMLFormElement;
  const status = $('upload-status');

  async function refresh(select?: string): Promise<void> {
    const res = await api('/api/datasets');
    if (!res.ok) return;
    const { datasets } = (await res.json()) as { datasets: UploadInfo[] };
    $('uploads').innerHTML = datasets.map((d) => `<li data-upload="${esc(d.id)}">${esc(d.name)} · ${esc(d.id)} · ${formatBytes(d.bytes)}, ${d.records.train + d.records.validation} paragraphs (${d.records.validation} held out)</li>`).join('');
    const choice = document.querySelector<HTMLSelectElement>('#job-form select[name=upload]')!;
    choice.innerHTML = datasets.map((d) => `<option value="${esc(d.id)}">${esc(d.name)} (${formatBytes(d.bytes)})</option>`).join('');
    if (select) choice.value = select;
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const file = ($('upload-file') as HTMLInputElement).files?.[0];
    if (!file) {
      status.textContent = 'choose a text file first';
      return;
    }
    const name = String(new FormData(form).get('uploadName') ?? '').trim() || file.name;
    status.textContent = `uploading ${file.name} (${formatBytes(file.size)})…`;
    status.classList.remove('error');
    const res = await api(`/api/datasets?name=${encodeURIComponent(name)}`, { method: 'POST', body: file, headers: { 'content-type': 'text/plain' } });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) {
      status.textContent = `not stored: ${body.error?.message ?? `HTTP ${res.status}`}`;
      status.classList.add('error');
      return;
    }
    const d = body.dataset as UploadInfo;
    status.textContent = `stored ${d.name} as ${d.id}: ${d.records.train + d.records.validation} paragraphs, ${d.records.validation} held out for validation`;
    await refresh(d.id);
  });
  void refresh();
}
