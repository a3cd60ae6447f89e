// Figures in README.md and docs/ that come from a benchmark cite the results file and key they quote,
// and figures.test.ts holds the two equal, so a re-run that moves a figure fails until the prose moves.
// `node --import tsx scripts/figures.ts` lists every citation and what is wrong with any.
//
// Citation: a figure, its unit, then in parentheses a backticked results file (bench/results/) and a
// key path: "a whole-round p99 of 360 ms (`coordinator.json summary.at_goal.round_p99_ms`)". The
// figure may be a list, "15.4, 12.4, 14.3, 18.6 s (`scale.json groupSizes.results.fixed.msToConsensus`)"
// ("/" or "and" also separate), when the path ends in an array of as many numbers (a name applied to
// an array maps over its elements). Path segments: object keys, array indices (`results.3`) and
// filters on (dotted) keys (`results[groupSize=8]`, `results[scenario.members=1024,scenario.pacing=paced]`).
// A key holding a word (an attack's name) is cited right after that word: "sign-flip
// (`byzantine.json summary.worst_attack_f5`)".
//
// Rounding: the quoted number's decimals decide; "1.09" stands for any value in [1.085, 1.095].
// Units convert only where the key's name (a statistic's, p50 or median, its parent's) gives its unit:
// a key in ms (`…_ms`, `…Ms`, `ms…`) quoted in s or min; a key in seconds (`…_s`, `…Seconds`) quoted
// in ms or min; a key in bytes (`…bytes`) quoted in KiB/MiB/GiB (2^10 steps) or KB/MB/GB (10^3 steps).
// A `%` cites a fraction × 100, unless the key's name says percent (`…percent`, `…_pct`). Any other
// unit (×, points, or any one lowercase word: syncs, rounds) is a word: the figure is compared as it is.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

export interface Citation {
  /** Markdown file and 1-based line of the citation. */
  doc: string;
  line: number;
  file: string;
  path: string;
  /** The figures quoted before it, as written, and their unit ('' for none). */
  quoted: string[];
  unit: string;
  /** The text just before the citation (whitespace collapsed), for a quoted word. */
  before: string;
}

const NUMBER = String.raw`[−-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?`;
const UNITS = ['ms', 's', 'min', 'h', '%', '×', 'x', 'KiB', 'MiB', 'GiB', 'KB', 'MB', 'GB', 'MB/s', 'points', 'pts'];
// Or one lowercase word: "3 rounds", "48 units".
const UNIT = [...UNITS.map((u) => u.replace(/[/]/g, '\\/')), '[a-z]+'].join('|');
/** A list of figures and an optional unit, at the end of the text before a citation. */
const FIGURE_BEFORE = new RegExp(String.raw`(${NUMBER}(?:(?:,\s+|\s*/\s*|,?\s+and\s+)${NUMBER})*)\s*(${UNIT})?\s*$`);
const CITATION = /\(`([\w.-]+\.json) ([^`]+)`\)/g;

/** Every citation in a markdown text, with the figures before it (an empty list where there are none). */
export function citationsIn(doc: string, text: string): Citation[] {
  const out: Citation[] = [];
  for (const m of text.matchAll(CITATION)) {
    const before = text.slice(Math.max(0, m.index! - 200), m.index!).replace(/\s+/g, ' ');
    const f = FIGURE_BEFORE.exec(before);
    // A digit glued to the list's front (a word like "p99" or "N=16") is not a figure.
    const glued = f && /[\w.]$/.test(before.slice(0, f.index));
    out.push({
      doc, line: text.slice(0, m.index!).split('\n').length, file: m[1], path: m[2],
      quoted: f && !glued ? f[1].split(/,\s+and\s+|,\s+|\s*\/\s*|\s+and\s+/) : [], unit: f && !glued ? (f[2] ?? '') : '', before: before.trimEnd(),
    });
  }
  return out;
}

/** The value at `path` in `json`, or a message saying where the path stops. */
export function resolvePath(json: unknown, path: string): { value: unknown } | { error: string } {
  let cur: unknown = json;
  const seen: string[] = [];
  // Names between dots, and bracketed indices or filters (whose keys may have dots of their own).
  const steps = path.match(/\[[^\]]*\]|[^.[\]]+/g) ?? [];
  if (/^\.|\.\.|\.$/.test(path)) return { error: `bad path "${path}"` };
  for (const step of steps) {
    const next = stepInto(cur, step);
    if (next === undefined) return { error: `no ${step} under ${seen.length ? seen.join('.') : 'the top level'}` };
    cur = next;
    seen.push(step);
  }
  return { value: cur };
}

function stepInto(cur: unknown, step: string): unknown {
  // [k=v] or [k=v,k2.sub=w]: the elements whose (dotted) keys hold those values, as text.
  if (/^\[[^\]]*=/.test(step)) {
    if (!Array.isArray(cur)) return undefined;
    const conditions = step.slice(1, -1).split(',').map((c) => c.split('=') as [string, string]);
    const at = (x: unknown, key: string) => key.split('.').reduce<unknown>((o, k) => (o !== null && typeof o === 'object' ? (o as Record<string, unknown>)[k] : undefined), x);
    const hits = cur.filter((x) => conditions.every(([k, v]) => String(at(x, k)) === v));
    return hits.length ? hits : undefined;
  }
  const key = step.startsWith('[') ? step.slice(1, -1) : step;
  if (Array.isArray(cur)) {
    if (/^\d+$/.test(key)) return cur[Number(key)];
    // A name applied to an array maps over its elements (each must have it).
    const mapped = cur.map((x) => (x !== null && typeof x === 'object' ? (x as Record<string, unknown>)[key] : undefined));
    return mapped.some((x) => x === undefined) ? undefined : mapped;
  }
  if (cur !== null && typeof cur === 'object' && Object.hasOwn(cur, key)) return (cur as Record<string, unknown>)[key];
  return undefined;
}

/** What the key's value is multiplied by to be compared with a figure in `unit`, by the key's name. */
export function scaleFor(path: string, unit: string): number {
  // A statistic (p50, median, …) or an index takes its parent's unit: `syncMs.p50` is in ms.
  const names = (path.replace(/\[[^\]]*\]/g, '').split('.')).filter((n) => n && !/^(p\d+|q\d|median|mean|min|max|\d+)$/.test(n));
  const name = names.at(-1) ?? '';
  const inMs = /(^ms([A-Z_]|$)|_ms$|Ms$)/.test(name);
  const inS = /(_s$|Seconds$|_seconds$)/.test(name);
  const time: Record<string, number> = { ms: 1, s: 1_000, min: 60_000, h: 3_600_000 };
  if (unit in time && (inMs || inS)) return (inMs ? 1 : 1_000) / time[unit];
  const binary: Record<string, number> = { KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30, KB: 1e3, MB: 1e6, GB: 1e9 };
  if (unit in binary && /bytes$/i.test(name)) return 1 / binary[unit];
  if (unit === '%' && !/(percent|_pct)$/i.test(name)) return 100;
  return 1;
}

const parseFigure = (s: string) => Number(s.replace(/,/g, '').replace('−', '-'));
const decimalsOf = (s: string) => s.split('.')[1]?.length ?? 0;

/** Whether a quoted figure stands for `value` (scaled to the figure's unit) at the figure's decimals. */
export function figureMatches(quoted: string, value: number): boolean {
  const q = parseFigure(quoted);
  return Math.abs(value - q) <= 0.5 * 10 ** -decimalsOf(quoted) * (1 + 1e-9) + 1e-12;
}

const where = (c: Citation) => `${c.doc}:${c.line}: \`${c.file} ${c.path}\``;

/** Problems with one citation against the results files it names (null: it holds). */
export function checkCitation(c: Citation, load: (file: string) => unknown | undefined): string | null {
  const json = load(c.file);
  if (json === undefined) return `${where(c)}: no bench/results/${c.file}`;
  const r = resolvePath(json, c.path);
  if ('error' in r) return `${where(c)}: ${c.file} has no key ${c.path} (${r.error})`;
  // A word the results hold (an attack's name, a backend) is quoted as it is, backticks allowed.
  if (typeof r.value === 'string') {
    return c.before.endsWith(r.value) || c.before.endsWith(`\`${r.value}\``) ? null : `${where(c)}: the text before it should end with "${r.value}", the key's value`;
  }
  if (c.quoted.length === 0) return `${where(c)}: no figure right before the citation (write "… 12.4 s (\`file key\`)")`;
  const values = Array.isArray(r.value) ? r.value : [r.value];
  if (values.length !== c.quoted.length) {
    return `${where(c)}: quotes ${c.quoted.length} figure(s) (${c.quoted.join(', ')}), the key holds ${values.length} (${JSON.stringify(r.value).slice(0, 120)})`;
  }
  const scale = scaleFor(c.path, c.unit);
  const wrong = c.quoted.flatMap((q, i) => {
    const v = values[i];
    if (typeof v !== 'number') return [`${q}: the key holds ${JSON.stringify(v)}, not a number`];
    const shown = (v * scale).toFixed(decimalsOf(q));
    const unit = /^[%×x]?$/.test(c.unit) ? c.unit : ` ${c.unit}`;
    return figureMatches(q, v * scale) ? [] : [`quoted ${q}${unit}, the results hold ${shown}${unit} (${v}${scale === 1 ? '' : ` × ${scale}`})`];
  });
  return wrong.length ? `${where(c)}: ${wrong.join('; ')}, after "…${c.before.slice(-60)}"` : null;
}

/** README.md and every markdown file under docs/. */
export function docFiles(root: string): string[] {
  const walk = (dir: string): string[] => readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? walk(p) : n.endsWith('.md') ? [p] : [];
  });
  return [join(root, 'README.md'), ...(existsSync(join(root, 'docs')) ? walk(join(root, 'docs')) : [])];
}

/** Every citation in the docs and what is wrong with each that does not hold. */
export function checkDocs(root: string): { citations: Citation[]; problems: string[] } {
  const cache = new Map<string, unknown>();
  const load = (file: string) => {
    if (!cache.has(file)) {
      const p = join(root, 'bench', 'results', file);
      cache.set(file, existsSync(p) && !file.includes('/') ? JSON.parse(readFileSync(p, 'utf8')) : undefined);
    }
    return cache.get(file);
  };
  const citations = docFiles(root).flatMap((p) => citationsIn(relative(root, p), readFileSync(p, 'utf8')));
  return { citations, problems: citations.map((c) => checkCitation(c, load)).filter((x): x is string => x !== null) };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const root = join(import.meta.dirname, '..');
  const { citations, problems } = checkDocs(root);
  for (const c of citations) console.log(`${c.doc}:${c.line}  ${c.quoted.join(', ')}${c.unit ? ` ${c.unit}` : ''}  ← ${c.file} ${c.path}`);
  console.log(`${citations.length} citations, ${problems.length} wrong`);
  for (const p of problems) console.log(p);
  process.exitCode = problems.length ? 1 : 0;
}
