// `node --import tsx bench/backfill-provenance.ts`: gives the results files written before runRecord
// (bench/machine.ts) the fields it records, from git and from what each file already holds, and says
// so in a `provenance` field. Nothing is estimated: a field git and the file cannot give is null.
// A file that has every field is left alone, so a re-run benchmark is never touched, and running this
// again changes nothing. To reproduce the backfill, run it on the commit before the one that added it.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const SCRIPT = 'bench/backfill-provenance.ts';
export const RECORD_FIELDS = ['commit', 'date', 'command', 'machine', 'durationMs'] as const;

/** The command that writes each results file (bench/run.ts's names; scale.json is `npm run simulate`). */
const COMMANDS: Record<string, string> = {
  'allreduce.json': 'npm run bench -- allreduce',
  'byzantine.json': 'npm run bench -- byzantine',
  'clip.json': 'npm run bench -- clip',
  'convergence.json': 'npm run bench -- convergence',
  'coordinator.json': 'npm run bench -- coordinator',
  'fuzz.json': 'npm run fuzz',
  'groups.json': 'npm run bench -- groups',
  'heterogeneous.json': 'npm run bench -- heterogeneous',
  'kernels.json': 'npm run bench -- kernels',
  'lm-tuning.json': 'npm run bench -- lm-tune',
  'lm.json': 'npm run bench -- lm',
  'memory.json': 'npm run bench -- memory',
  'scale.json': 'npm run simulate',
  'soak.json': 'npm run bench -- soak',
  'tuning.json': 'npm run bench -- tune',
};

type Json = Record<string, unknown>;

function git(root: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd: root, encoding: 'utf8', maxBuffer: 64 << 20 }).trim();
}

/** The last commit that changed `path`: the one that recorded its run (a backfilled file is never backfilled again). */
function recordingCommit(root: string, path: string): string | null {
  return git(root, 'log', '-1', '--format=%H', '--', path) || null;
}

const backfilled = (j: Json) => typeof j.provenance === 'string' && j.provenance.startsWith('backfilled');
const complete = (j: Json) => typeof j.commit === 'string' && typeof j.date === 'string' && typeof j.command === 'string'
  && typeof j.machine === 'object' && j.machine !== null && typeof j.durationMs === 'number';

/** The file with runRecord's fields filled in and `provenance` saying where each came from; null when its run recorded them or it was backfilled already. */
export function backfill(root: string, name: string): Json | null {
  const path = `bench/results/${name}`;
  const j = JSON.parse(readFileSync(join(root, path), 'utf8')) as Json;
  if (complete(j) || backfilled(j)) return null;
  const notes: string[] = [];
  const filled: Json = {};
  const sha = recordingCommit(root, path);
  if (typeof j.commit === 'string') {
    filled.commit = j.commit;
  } else if (sha) {
    const [date, subject] = git(root, 'show', '-s', '--format=%aI%n%s', sha).split('\n');
    const others = git(root, 'show', '--format=', '--name-only', sha).split('\n').filter((f) => f && f !== path);
    filled.commit = sha;
    notes.push(`commit is the last commit that changed this file (${date}, "${subject.slice(0, 90)}${subject.length > 90 ? '…' : ''}"), not one the run recorded; `
      + `the run measured the tree that commit was made from, which git knows only as its parent ${git(root, 'rev-parse', `${sha}^`).slice(0, 12)} `
      + `plus what it committed beside this file: ${others.length ? others.join(', ') : 'nothing'}`);
  } else {
    filled.commit = null;
    notes.push('commit: git has no commit of this file');
  }
  const noted = (value: unknown, note: string) => {
    notes.push(note);
    return value;
  };
  filled.date = typeof j.date === 'string' ? j.date
    : typeof j.createdAt === 'string' ? noted(j.createdAt, 'date copied from createdAt (when the report was built, at the end of the run)')
    : sha ? noted(git(root, 'show', '-s', '--format=%aI', sha), 'date is the recording commit\'s author date: the run ended before it; when it started is not recorded')
    : noted(null, 'date: not recorded');
  filled.command = typeof j.command === 'string' ? j.command
    : noted(COMMANDS[name] ?? null, `command is the benchmark's own (bench/run.ts), not recorded by the run${sectionsNote(j)}`);
  filled.machine = j.machine ?? noted(null, 'machine: not recorded');
  filled.durationMs = typeof j.durationMs === 'number' ? j.durationMs
    : typeof j.totalSeconds === 'number' ? noted(Math.round(j.totalSeconds * 1000), 'durationMs is totalSeconds × 1000')
    : typeof j.duration_s === 'number' ? noted(Math.round(j.duration_s * 1000), 'durationMs is duration_s × 1000 (the run kept 0.1 s)')
    : noted(null, 'durationMs: the run recorded no duration');
  const { benchmark, ...rest } = j;
  for (const k of RECORD_FIELDS) delete rest[k];
  return { benchmark, ...filled, provenance: `backfilled by ${SCRIPT} (from git log and the fields the file had): ${notes.join('; ')}`, ...rest };
}

/** byzantine.json's sections re-run later with --only, by their dates. */
function sectionsNote(j: Json): string {
  const sections = j.sectionDates as Record<string, string> | undefined;
  if (!sections || typeof j.date !== 'string') return '';
  const later = Object.entries(sections).filter(([, d]) => d > (j.date as string));
  return later.length ? `; sections re-run after ${j.date} with --only: ${later.map(([s, d]) => `${s} (${d})`).join(', ')}` : '';
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const root = git(process.cwd(), 'rev-parse', '--show-toplevel');
  const dir = join(root, 'bench/results');
  for (const name of readdirSync(dir).filter((f) => f.endsWith('.json') && !f.endsWith('.quick.json')).sort()) {
    const out = backfill(root, name);
    if (!out) {
      console.log(`${name}: unchanged (recorded by its run, or backfilled already)`);
      continue;
    }
    writeFileSync(join(dir, name), `${JSON.stringify(out, null, 2)}\n`);
    console.log(`${name}: ${out.provenance}`);
  }
}
