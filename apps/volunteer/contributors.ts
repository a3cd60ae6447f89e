// A job's public contributor list (`?job=ID`): no token needed, names or anonymized ids only.
import type { PublicContributors } from '@tabfleet/protocol';
import { $, esc } from '../shared/dom';
import { formatCount, formatDuration } from '../shared/format';

async function show(): Promise<void> {
  const jobId = new URLSearchParams(location.search).get('job') ?? '';
  const fail = (message: string) => {
    $('job-title').textContent = 'No such job';
    $('error').hidden = false;
    $('error').textContent = message;
  };
  if (!jobId) return fail('Open this page from the volunteer page, or add ?job=<job id> to its address.');
  const res = await fetch(`/api/public/jobs/${encodeURIComponent(jobId)}/contributors`);
  const body = await res.json();
  if (!res.ok) return fail(body.error?.message ?? `HTTP ${res.status}`);
  const { job, contributors } = body as PublicContributors;
  document.title = `tabfleet — contributors to ${job.name}`;
  $('job-title').textContent = job.name;
  $('job-summary').innerHTML = `<span class="state-${esc(job.state)}">${esc(job.state)}</span> · ${esc(job.preset)} on ${esc(job.dataset)} · ${esc(job.strategy)}`
    + ` · ${contributors.length} contributor${contributors.length === 1 ? '' : 's'}`;
  $('contributors').querySelector('tbody')!.innerHTML = contributors.map((c, i) => `<tr><td>${i + 1}</td><td>${c.named ? esc(c.name) : `<span class="muted">${esc(c.name)}</span>`}</td>
    <td class="num">${formatCount(c.samples)}</td><td class="num">${formatCount(c.syncs)}</td><td class="num">${formatDuration(c.computeMs)}</td>
    <td>${new Date(c.lastAt).toLocaleString()}</td></tr>`).join('') || '<tr><td colspan="6" class="muted">Nobody has completed a sync of this job yet.</td></tr>';
}

void show();
