// Progress bars: drawn on stderr only when it is a terminal, cleared for a line and drawn again, and
// what a bar line says at 0, part way and done, with or without a known total.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { Output, renderBar, table, type Io } from './output';

function io(tty: boolean): { io: Io; err: () => string; out: () => string } {
  const stdout = new PassThrough(), stderr = Object.assign(new PassThrough(), { isTTY: tty, columns: 100 });
  const text = (s: PassThrough) => () => (s.read() ?? '').toString();
  return { io: { stdout, stderr, stdin: new PassThrough(), env: {} }, err: text(stderr), out: text(stdout) };
}

test('a bar line: its fill, amounts and percentage', () => {
  assert.equal(renderBar('job', 0, 40, 'steps'), `job [${'-'.repeat(28)}] 0/40 0%`);
  assert.equal(renderBar('job', 10, 40, 'steps', '  running'), `job [${'#'.repeat(7)}${'-'.repeat(21)}] 10/40 25%  running`);
  assert.equal(renderBar('f', 3 * 1024 * 1024, 3 * 1024 * 1024, 'bytes'), `f [${'#'.repeat(28)}] 3.0 MiB/3.0 MiB 100%`);
  assert.equal(renderBar('f', 2048, null, 'bytes'), 'f 2.0 KiB', 'no total: only the amount');
});

test('bars go to stderr only when it is a terminal; stdout gets results only', () => {
  const quiet = io(false);
  const bar = new Output(quiet.io, false).progress('up', 100, 'bytes');
  bar.update(50, { force: true });
  bar.finish();
  assert.equal(quiet.err(), '');

  const term = io(true);
  const out = new Output(term.io, true);
  const tty = out.progress('job', 40, 'steps');
  tty.update(20, { force: true });
  assert.equal(term.err(), `\r\x1b[K${renderBar('job', 20, 40, 'steps')}`);
  tty.clear();
  out.line({ event: 'metric' }, 'ignored in json mode');
  tty.restore();
  assert.equal(term.err(), `\r\x1b[K\r\x1b[K${renderBar('job', 20, 40, 'steps')}`);
  assert.equal(term.out(), '{"event":"metric"}\n');
});

test('a table pads every column but the last', () => {
  assert.equal(table(['ID', 'STATE'], [['job-1', 'running'], ['j2', 'done']]), 'ID     STATE\njob-1  running\nj2     done');
});
