// Numbers as people read them, shared by the apps: sizes in the unit that fits (6.5 kB, not 0.0 MB).

/** Decimal units (1 kB = 1000 B), as browsers' and operating systems' network figures use. */
export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return '—';
  if (n < 1e3) return `${Math.round(n)} B`;
  for (const [unit, size] of [['kB', 1e3], ['MB', 1e6], ['GB', 1e9]] as const) {
    // 999.95 kB would print as "1000.0 kB": such values go up a unit.
    if (n < size * 999.95 || unit === 'GB') return `${(n / size).toFixed(n / size < 10 ? 2 : 1).replace(/\.?0+$/, '')} ${unit}`;
  }
  return `${n} B`;
}

/** A duration: "45 s", "12 min", "3.5 h". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '—';
  const s = ms / 1000;
  if (s < 90) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

/** An integer with thousands separators: 1,234,567. */
export function formatCount(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** A job's model as people read it: the preset's name, or a GPT's shape ("GPT 4×128, 4 heads, context 128, bytes"). */
export function formatModel(spec: { preset: string; gpt?: { layers: number; heads: number; width: number; context: number }; tokenizer?: string }): string {
  if (spec.preset !== 'gpt' || !spec.gpt) return spec.preset;
  const g = spec.gpt;
  return `GPT ${g.layers}×${g.width}, ${g.heads} heads, context ${g.context}${spec.tokenizer ? `, ${spec.tokenizer}` : ''}`;
}
