// Counters for /metrics in the Prometheus text format, plus gauges computed at scrape time.
export class Counters {
  private readonly values = new Map<string, number>();

  count(name: string, labels: Record<string, string> = {}): void {
    const key = `tabfleet_${name}_total${formatLabels(labels)}`;
    this.values.set(key, (this.values.get(key) ?? 0) + 1);
  }

  get(name: string, labels: Record<string, string> = {}): number {
    return this.values.get(`tabfleet_${name}_total${formatLabels(labels)}`) ?? 0;
  }

  /** Renders counters and the given gauges (name → value or labelled values). */
  render(gauges: Record<string, number | [Record<string, string>, number][]>): string {
    const lines: string[] = [];
    const counterNames = new Set([...this.values.keys()].map((k) => k.split('{')[0]));
    for (const name of [...counterNames].sort()) {
      lines.push(`# TYPE ${name} counter`);
      for (const [k, v] of this.values) if (k.split('{')[0] === name) lines.push(`${k} ${v}`);
    }
    for (const [name, value] of Object.entries(gauges)) {
      lines.push(`# TYPE tabfleet_${name} gauge`);
      if (typeof value === 'number') lines.push(`tabfleet_${name} ${value}`);
      else for (const [labels, v] of value) lines.push(`tabfleet_${name}${formatLabels(labels)} ${v}`);
    }
    return `${lines.join('\n')}\n`;
  }
}

function formatLabels(labels: Record<string, string>): string {
  const entries = Object.entries(labels).sort(([a], [b]) => a.localeCompare(b));
  if (entries.length === 0) return '';
  return `{${entries.map(([k, v]) => `${k}="${v.replace(/["\\\n]/g, '_')}"`).join(',')}}`;
}
