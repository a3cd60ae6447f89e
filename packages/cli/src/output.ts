// What a command prints: results on stdout (one JSON document with --json, text otherwise), notes and
// errors on stderr, and progress bars on stderr only when stderr is a terminal.
import type { Writable } from 'node:stream';

export interface Io {
  stdout: Writable;
  stderr: Writable & { isTTY?: boolean; columns?: number };
  stdin: NodeJS.ReadableStream;
  env: Record<string, string | undefined>;
}

export class Output {
  constructor(readonly io: Io, readonly json: boolean) {}

  /** The command's result: `doc` as JSON with --json, else `text` (when given). */
  result(doc: unknown, text?: string | null): void {
    if (this.json) this.io.stdout.write(`${JSON.stringify(doc)}\n`);
    else if (text != null) this.io.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  }

  /** One JSON line (watch --json) or one text line. */
  line(doc: unknown, text: string): void {
    this.io.stdout.write(this.json ? `${JSON.stringify(doc)}\n` : `${text}\n`);
  }

  /** A note for a person, on stderr in both modes. */
  note(text: string): void {
    this.io.stderr.write(`${text}\n`);
  }

  /** A bar on stderr when it is a terminal; otherwise a bar that draws nothing. */
  progress(label: string, total: number | null, unit: 'bytes' | 'steps'): Progress {
    return new Progress(this.io.stderr.isTTY ? this.io.stderr : null, label, total, unit);
  }
}

const BAR_WIDTH = 28;
/** Redraws at most this often (ms): a fast download would otherwise write the terminal thousands of times. */
const REDRAW_MS = 100;

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB'];
  let v = n / 1024, i = 0;
  while (v >= 1024 && i < units.length - 1) (v /= 1024), i++;
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

/** One bar line: label, bar, done/total and the percentage (or a count when the total is unknown). */
export function renderBar(label: string, done: number, total: number | null, unit: 'bytes' | 'steps', suffix = ''): string {
  const amount = (n: number) => (unit === 'bytes' ? formatBytes(n) : n.toLocaleString('en'));
  if (!total) return `${label} ${amount(done)}${suffix}`;
  const frac = Math.max(0, Math.min(1, done / total));
  const full = Math.round(frac * BAR_WIDTH);
  return `${label} [${'#'.repeat(full)}${'-'.repeat(BAR_WIDTH - full)}] ${amount(done)}/${amount(total)} ${Math.floor(frac * 100)}%${suffix}`;
}

export class Progress {
  private done = 0;
  private suffix = '';
  private drawnAt = 0;
  private shown = false;

  constructor(private readonly tty: (Writable & { columns?: number }) | null, private readonly label: string, private total: number | null, private readonly unit: 'bytes' | 'steps') {}

  update(done: number, opts: { total?: number | null; suffix?: string; force?: boolean } = {}): void {
    this.done = done;
    if (opts.total !== undefined) this.total = opts.total;
    if (opts.suffix !== undefined) this.suffix = opts.suffix;
    const now = Date.now();
    if (!this.tty || (!opts.force && now - this.drawnAt < REDRAW_MS)) return;
    this.drawnAt = now;
    this.draw();
  }

  private draw(): void {
    if (!this.tty) return;
    const line = renderBar(this.label, this.done, this.total, this.unit, this.suffix).slice(0, Math.max(20, (this.tty.columns || 80) - 1));
    this.tty.write(`\r\x1b[K${line}`);
    this.shown = true;
  }

  /** Clears the bar so a line can be printed, then `restore` draws it again. */
  clear(): void {
    if (this.tty && this.shown) this.tty.write('\r\x1b[K');
    this.shown = false;
  }

  restore(): void {
    this.draw();
  }

  /** Leaves the last state of the bar on its own line. */
  finish(): void {
    if (!this.tty) return;
    this.draw();
    this.tty.write('\n');
    this.shown = false;
  }
}

/** Rows as columns padded to their widest cell. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const fmt = (r: string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ');
  return [fmt(header), ...rows.map(fmt)].join('\n');
}
