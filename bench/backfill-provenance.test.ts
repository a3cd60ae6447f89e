import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { backfill } from './backfill-provenance';
import { missingRecord } from './machine';

const dir = mkdtempSync(join(tmpdir(), 'tabfleet-backfill-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd: dir, encoding: 'utf8' }).trim();
const write = (path: string, body: unknown) => {
  mkdirSync(join(dir, path, '..'), { recursive: true });
  writeFileSync(join(dir, path), typeof body === 'string' ? body : `${JSON.stringify(body, null, 2)}\n`);
};

test('a results file from before runRecord gets its recording commit, and provenance says so', () => {
  git('init', '-q');
  write('README.md', 'x\n');
  git('add', '.');
  git('commit', '-q', '-m', 'start');
  write('bench/groups.ts', '// the code the run measured\n');
  write('bench/results/groups.json', { benchmark: 'groups', createdAt: '2026-01-02T03:04:05.000Z', machine: { cores: 2 }, summary: { x: 1 }, totalSeconds: 12.3456 });
  git('add', '.');
  git('commit', '-q', '-m', 'groups.json: a run');
  const sha = git('rev-parse', 'HEAD');
  const out = backfill(dir, 'groups.json')!;
  assert.deepEqual(Object.keys(out).slice(0, 7), ['benchmark', 'commit', 'date', 'command', 'machine', 'durationMs', 'provenance']);
  assert.equal(out.commit, sha);
  assert.equal(out.date, '2026-01-02T03:04:05.000Z');
  assert.equal(out.command, 'npm run bench -- groups');
  assert.equal(out.durationMs, 12_346);
  assert.deepEqual(out.summary, { x: 1 }, 'the figures are kept as they were');
  const p = out.provenance as string;
  assert.match(p, /^backfilled by bench\/backfill-provenance\.ts/);
  assert.match(p, new RegExp(`parent ${git('rev-parse', 'HEAD^').slice(0, 12)} plus what it committed beside this file: bench/groups\\.ts`));
  assert.match(p, /date copied from createdAt/);
  assert.match(p, /durationMs is totalSeconds × 1000/);
  assert.deepEqual(missingRecord(out), []);

  write('bench/results/groups.json', out);
  git('commit', '-qam', 'backfill');
  assert.equal(backfill(dir, 'groups.json'), null, 'a backfilled file is left alone');
});

test('without a date or a duration: the commit\'s date, said so, and a null duration the check accepts only as backfilled', () => {
  write('bench/results/scale.json', { benchmark: 'scale', machine: { cores: 2 } });
  git('add', '.');
  git('commit', '-q', '-m', 'scale.json');
  const out = backfill(dir, 'scale.json')!;
  assert.equal(out.date, git('show', '-s', '--format=%aI', 'HEAD'));
  assert.equal(out.command, 'npm run simulate');
  assert.equal(out.durationMs, null);
  assert.match(out.provenance as string, /the recording commit's author date: the run ended before it/);
  assert.deepEqual(missingRecord(out), []);
  assert.deepEqual(missingRecord({ ...out, provenance: undefined }), ['durationMs']);
});

test('a file its run recorded is left alone; so is every committed results file (the backfill is done)', () => {
  write('bench/results/kernels.json', { benchmark: 'kernels', commit: 'a'.repeat(40), date: '2026-01-01T00:00:00.000Z', command: 'npm run bench -- kernels', machine: {}, durationMs: 1 });
  assert.equal(backfill(dir, 'kernels.json'), null);
  const root = join(import.meta.dirname, '..');
  const files = readdirSync(join(root, 'bench/results')).filter((f) => f.endsWith('.json') && !f.endsWith('.quick.json'));
  assert.deepEqual(files.filter((f) => backfill(root, f) !== null), []);
});
