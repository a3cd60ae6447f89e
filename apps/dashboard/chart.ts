// Small SVG line charts, redrawn on every update: one job's loss or accuracy over steps, and several
// jobs' curves on one frame for the runs-compared view.
import { esc } from '../shared/dom';

const W = 400, H = 180, PAD = { l: 40, r: 8, t: 8, b: 22 };

export function drawLineChart(svg: SVGSVGElement, points: { x: number; y: number }[], opts: { yMin?: number; yMax?: number; format?: (y: number) => string; color?: string } = {}): void {
  const fmt = opts.format ?? ((y: number) => y.toPrecision(3));
  if (points.length === 0) {
    svg.innerHTML = `<text x="${W / 2}" y="${H / 2}" fill="#9aa5b1" text-anchor="middle" font-size="12">no data yet</text>`;
    return;
  }
  const xs = points.map((p) => p.x), ys = points.map((p) => p.y);
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1);
  const y0 = opts.yMin ?? Math.min(...ys), y1 = Math.max(opts.yMax ?? Math.max(...ys), y0 + 1e-6);
  const sx = (x: number) => PAD.l + ((x - x0) / (x1 - x0)) * (W - PAD.l - PAD.r);
  const sy = (y: number) => H - PAD.b - ((y - y0) / (y1 - y0)) * (H - PAD.t - PAD.b);
  const path = points.map((p, i) => `${i ? 'L' : 'M'}${sx(p.x).toFixed(1)},${sy(p.y).toFixed(1)}`).join('');
  const grid = [0, 0.5, 1].map((f) => {
    const y = y0 + f * (y1 - y0);
    return `<line x1="${PAD.l}" x2="${W - PAD.r}" y1="${sy(y)}" y2="${sy(y)}" stroke="#223"/><text x="${PAD.l - 4}" y="${sy(y) + 4}" fill="#9aa5b1" font-size="10" text-anchor="end">${fmt(y)}</text>`;
  });
  const last = points[points.length - 1];
  svg.innerHTML = `${grid.join('')}
    <text x="${PAD.l}" y="${H - 6}" fill="#9aa5b1" font-size="10">step ${x0}</text>
    <text x="${W - PAD.r}" y="${H - 6}" fill="#9aa5b1" font-size="10" text-anchor="end">step ${x1}</text>
    <path d="${path}" fill="none" stroke="${opts.color ?? '#58a6ff'}" stroke-width="1.8"/>
    <circle cx="${sx(last.x)}" cy="${sy(last.y)}" r="3" fill="${opts.color ?? '#58a6ff'}"><title>${fmt(last.y)} at step ${last.x}</title></circle>`;
  svg.dataset.points = String(points.length);
  svg.dataset.last = String(last.y);
}

export interface Series {
  label: string;
  color: string;
  points: { x: number; y: number }[];
}

/**
 * Several series on one frame (the runs-compared view): shared scales over all their points, the
 * x axis named and labelled at its ends and middle, each series a line in its own colour. The frame
 * is the SVG's viewBox.
 */
export function drawSeriesChart(svg: SVGSVGElement, series: Series[], opts: { xLabel: string; xFormat: (x: number) => string; yMin?: number; yMax?: number; yFormat?: (y: number) => string }): void {
  const box = svg.viewBox.baseVal, w = box.width || 600, h = box.height || 260;
  const pad = { l: 56, r: 14, t: 12, b: 40 };
  const all = series.flatMap((s) => s.points);
  const yFmt = opts.yFormat ?? ((y: number) => y.toPrecision(3));
  svg.dataset.series = String(series.filter((s) => s.points.length).length);
  if (all.length === 0) {
    svg.innerHTML = `<text x="${w / 2}" y="${h / 2}" fill="#9aa5b1" text-anchor="middle" font-size="14">no points yet</text>`;
    return;
  }
  const x0 = Math.min(...all.map((p) => p.x)), x1 = Math.max(...all.map((p) => p.x), x0 + 1e-9);
  const y0 = opts.yMin ?? Math.min(...all.map((p) => p.y));
  const y1 = Math.max(opts.yMax ?? Math.max(...all.map((p) => p.y)), y0 + 1e-6);
  const sx = (x: number) => pad.l + ((x - x0) / (x1 - x0)) * (w - pad.l - pad.r);
  const sy = (y: number) => h - pad.b - ((y - y0) / (y1 - y0)) * (h - pad.t - pad.b);
  const grid = [0, 0.25, 0.5, 0.75, 1].map((f) => {
    const y = y0 + f * (y1 - y0);
    return `<line x1="${pad.l}" x2="${w - pad.r}" y1="${sy(y)}" y2="${sy(y)}" stroke="#223"/>`
      + `<text x="${pad.l - 4}" y="${sy(y) + 4}" fill="#9aa5b1" font-size="13" text-anchor="end">${yFmt(y)}</text>`;
  });
  const ticks = [0, 0.5, 1].map((f, i) => {
    const x = x0 + f * (x1 - x0);
    return `<text x="${sx(x)}" y="${h - pad.b + 17}" fill="#9aa5b1" font-size="13" text-anchor="${['start', 'middle', 'end'][i]}">${opts.xFormat(x)}</text>`;
  });
  const lines = series.filter((s) => s.points.length).map((s) => {
    const d = s.points.map((p, i) => `${i ? 'L' : 'M'}${sx(p.x).toFixed(1)},${sy(p.y).toFixed(1)}`).join('');
    const last = s.points[s.points.length - 1];
    return `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2.5" stroke-linejoin="round"><title>${esc(s.label)}</title></path>`
      + `<circle cx="${sx(last.x)}" cy="${sy(last.y)}" r="3.5" fill="${s.color}"/>`;
  });
  svg.innerHTML = `${grid.join('')}${ticks.join('')}
    <text x="${(pad.l + w - pad.r) / 2}" y="${h - 4}" fill="#9aa5b1" font-size="13" text-anchor="middle">${opts.xLabel}</text>${lines.join('')}`;
}
