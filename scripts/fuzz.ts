// `npm run fuzz [-- --seconds N] [--seed S] [--only TEXT] [--out FILE]`: runs every decoder's
// properties (scripts/fuzz/) for a share of N seconds each (default 300 in all), prints and writes
// bench/results/fuzz.json: cases per decoder and per property, the seed, durations and any
// counterexample. Exits 1 when a property failed. `npm test` runs the same properties briefly.
import { writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import fc from 'fast-check';
import { runRecord } from './run-record';
import { TARGETS } from './fuzz/targets';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: { seconds: { type: 'string', default: '300' }, seed: { type: 'string' }, only: { type: 'string' }, out: { type: 'string' } },
});
const seconds = Number(values.seconds);
if (!(seconds > 0)) throw new Error(`--seconds must be a positive number, got ${values.seconds}`);
const seed = values.seed === undefined ? (Date.now() ^ (Math.random() * 2 ** 31)) | 0 : Number(values.seed);
const targets = TARGETS.filter((t) => !values.only || `${t.decoder}: ${t.name}`.includes(values.only));
if (targets.length === 0) throw new Error(`no target matches ${values.only}`);

// Server-backed properties pay for HTTP round trips: they get the same time, fewer cases.
const perTargetMs = (seconds * 1000) / targets.length;
const started = Date.now();
const runs: { decoder: string; name: string; cases: number; ms: number; failed: boolean; counterexample: string | null; error: string | null; seed: number; path: string | null }[] = [];
for (const t of targets) {
  const { property, close } = await t.open();
  const t0 = performance.now();
  const d = await fc.check(property, { seed, numRuns: Number.MAX_SAFE_INTEGER, interruptAfterTimeLimit: perTargetMs, markInterruptAsFailure: false });
  const ms = Math.round(performance.now() - t0);
  await close?.();
  const run = {
    decoder: t.decoder,
    name: t.name,
    cases: d.numRuns,
    ms,
    failed: d.failed,
    counterexample: d.failed ? fc.stringify(d.counterexample) : null,
    error: d.failed ? String((d.errorInstance as Error | undefined)?.message ?? d.errorInstance) : null,
    seed: d.seed,
    path: d.failed ? d.counterexamplePath : null,
  };
  runs.push(run);
  console.log(`${run.failed ? 'FAIL' : 'ok  '} ${t.decoder}: ${t.name}: ${run.cases} cases in ${(ms / 1000).toFixed(1)} s${run.failed ? `\n     counterexample ` +
    `${run.counterexample}\n     ${run.error}` : ''}`);
}

const decoders: Record<string, { cases: number; properties: number; failed: number; ms: number }> = {};
for (const r of runs) {
  const s = (decoders[r.decoder] ??= { cases: 0, properties: 0, failed: 0, ms: 0 });
  s.cases += r.cases;
  s.properties++;
  s.failed += r.failed ? 1 : 0;
  s.ms += r.ms;
}
const result = {
  benchmark: 'fuzz',
  ...runRecord(started, `npm run fuzz${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`),
  fast_check: (fc as unknown as { __version: string }).__version,
  seed,
  seconds_budget: seconds,
  // soak.json quotes this rounded figure; durationMs above is the exact one.
  duration_s: Math.round((Date.now() - started) / 100) / 10,
  summary: { cases: runs.reduce((a, r) => a + r.cases, 0), properties: runs.length, failed: runs.filter((r) => r.failed).length },
  decoders,
  runs,
};
const out = values.out ?? join(root, 'bench/results/fuzz.json');
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
console.log(`${result.summary.cases} cases over ${runs.length} properties in ${result.duration_s} s (seed ${seed}) → ${out}`);
process.exit(result.summary.failed ? 1 : 0);
