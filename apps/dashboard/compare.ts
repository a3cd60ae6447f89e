// Runs compared: the loss and accuracy curves of the jobs a researcher picked in the list, on one chart
// each, by step, samples seen or wall time, every job in its own colour, and a table beside them that
// names each job with its colour and the settings that tell the jobs apart. Points come from the
// metrics JSON API (GET /api/jobs/:id/metrics), read again while a compared job is still running.
import type { JobSummary, MetricPoint } from '@tabfleet/protocol';
import { $, esc } from '../shared/dom';
import { formatCount, formatDuration } from '../shared/format';
import { drawSeriesChart, type Series } from './chart';
import { curvesOf, differingSettings, X_AXES, type XAxis } from './compare-data';

/** At most this many jobs on one chart: past it the colours stop telling them apart. */
export const COMPARE_LIMIT = 6;
/** One colour per picked job, in the order picked; none is the grid's or the labels' colour. */
export const SERIES_COLORS = ['#58a6ff', '#f0883e', '#3fb950', '#d2a8ff', '#ff7b72', '#e3b341'] as const;
/** A running job's points are read again at most this often while it is compared. */
const RELOAD_MS = 2_000;

const AXIS_LABELS: Record<XAxis, string> = { step: 'optimizer steps per worker', samples: 'training samples seen (all workers)', time: 'wall time since the first sync' };

/** 1234 → "1.2k", 3_400_000 → "3.4M": sample counts on an axis. */
function compact(n: number): string {
  const units: [number, string][] = [[1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
  for (const [size, unit] of units) if (Math.abs(n) >= size) return `${(n / size).toFixed(n / size < 10 ? 1 : 0)}${unit}`;
  return formatCount(n);
}
const X_FORMATS: Record<XAxis, (x: number) => string> = { step: formatCount, samples: compact, time: (s) => formatDuration(s * 1000) };

interface CompareDeps {
  api(path: string): Promise<Response>;
  job(id: string): JobSummary | undefined;
}

export interface CompareView {
  /** Shows these jobs (read afresh from the API). */
  open(ids: string[]): Promise<void>;
  /** A job changed or has new points: if it is compared, its points are read again (at most every RELOAD_MS). */
  changed(jobId: string): void;
  close(): void;
}

export function createCompareView(deps: CompareDeps): CompareView {
  let ids: string[] = [];
  const points = new Map<string, MetricPoint[]>();
  const problems = new Map<string, string>();
  const dirty = new Set<string>();
  let axis: XAxis = 'step';
  let reload: ReturnType<typeof setTimeout> | null = null;

  async function load(id: string): Promise<void> {
    const res = await deps.api(`/api/jobs/${encodeURIComponent(id)}/metrics`);
    const body = await res.json().catch(() => ({}));
    if (!res.ok) {
      problems.set(id, body.error?.message ?? `HTTP ${res.status}`);
      return;
    }
    problems.delete(id);
    points.set(id, body.points as MetricPoint[]);
  }

  function render(): void {
    const shown = ids.filter((id) => points.has(id) && deps.job(id));
    const colored = shown.map((id, i) => ({ id, job: deps.job(id)!, color: SERIES_COLORS[i], curves: curvesOf(points.get(id)!, deps.job(id)!.spec, axis) }));
    const series = (pick: 'loss' | 'accuracy'): Series[] => colored.map((c) => ({ label: c.job.name, color: c.color, points: c.curves[pick] }));
    const chart = { xLabel: AXIS_LABELS[axis], xFormat: X_FORMATS[axis] };
    drawSeriesChart($('compare-loss') as unknown as SVGSVGElement, series('loss'), { ...chart, yMin: 0 });
    const accuracy = series('accuracy');
    $('compare-acc-figure').hidden = accuracy.every((s) => s.points.length === 0);
    drawSeriesChart($('compare-acc') as unknown as SVGSVGElement, accuracy, { ...chart, yFormat: (y) => `${(100 * y).toFixed(0)}%` });
    renderTable(colored);
    const missing = ids.filter((id) => !shown.includes(id)).map((id) => `${id}: ${problems.get(id) ?? 'not a job here'}`);
    $('compare-status').textContent = missing.length ? `Not shown: ${missing.join('; ')}.` : '';
  }

  function renderTable(colored: { id: string; job: JobSummary; color: string; curves: ReturnType<typeof curvesOf> }[]): void {
    // The job column names each job already.
    const { fields, values } = differingSettings(colored.map((c) => c.job.spec), ['name']);
    const head = ['job', 'state', 'last loss', 'last accuracy', ...fields];
    const rows = colored.map((c, i) => {
      const loss = c.curves.loss.at(-1), acc = c.curves.accuracy.at(-1);
      const swatch = `<svg class="swatch" viewBox="0 0 12 12" aria-hidden="true"><rect width="12" height="12" rx="2" fill="${c.color}"/></svg>`;
      return `<tr data-job="${esc(c.id)}" data-color="${c.color}"><td>${swatch}<a href="#/jobs/${esc(c.id)}" data-label>${esc(c.job.name)}</a></td>`
        + `<td class="state-${c.job.state}">${c.job.state}</td><td class="num">${loss ? loss.y.toFixed(3) : '—'}</td>`
        + `<td class="num">${acc ? `${(100 * acc.y).toFixed(2)}%` : '—'}</td>${values[i].map((v) => `<td>${esc(v)}</td>`).join('')}</tr>`;
    });
    const caption = '<caption>Each job in its colour on the charts, with the settings that tell the jobs apart</caption>';
    $('compare-table').innerHTML = `${caption}<thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${rows.join('')}</tbody>`;
    $('compare-same').hidden = fields.length > 0 || colored.length < 2;
  }

  for (const input of document.querySelectorAll<HTMLInputElement>('#compare-axis input[name=x-axis]')) {
    input.addEventListener('change', () => {
      if (input.checked && (X_AXES as readonly string[]).includes(input.value)) axis = input.value as XAxis;
      render();
    });
  }

  return {
    async open(list) {
      ids = list;
      points.clear();
      problems.clear();
      $('compare-status').textContent = ids.length < 2 ? 'Pick two or more jobs in the list to compare them.' : 'reading the jobs\' metrics…';
      await Promise.all(ids.map(load));
      render();
    },
    changed(jobId) {
      if (!ids.includes(jobId)) return;
      dirty.add(jobId);
      reload ??= setTimeout(async () => {
        const stale = [...dirty].filter((id) => ids.includes(id));
        dirty.clear();
        await Promise.all(stale.map(load));
        reload = null;
        if (ids.length) render();
      }, RELOAD_MS);
    },
    close() {
      ids = [];
      dirty.clear();
      if (reload) clearTimeout(reload);
      reload = null;
    },
  };
}
