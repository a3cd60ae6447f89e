// A small SVG line chart: enough for loss and accuracy over steps, redrawn on every update.
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
