// The `npm run bench` dispatcher: lists benchmarks with no name, rejects unknown names and bad options.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { repoRoot } from '@tabfleet/headless';

function bench(...args: string[]) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'bench/run.ts', ...args], { cwd: repoRoot, encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('with no argument it lists the benchmarks and exits 0', () => {
  const r = bench();
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /usage: npm run bench -- <name>/);
  assert.match(r.stdout, /^\s+kernels\s+\S/m);
});

test('an unknown benchmark is a clear error with exit code 1', () => {
  const r = bench('no-such-bench');
  assert.equal(r.code, 1);
  assert.match(r.stderr, /unknown benchmark "no-such-bench"/);
  assert.match(r.stderr, /kernels/);
});

test('bad options are rejected with exit code 1 before anything runs', () => {
  for (const args of [['kernels', '--runs', '0'], ['kernels', '--runs', 'many'], ['kernels', '--frobnicate'], ['kernels', 'coordinator']]) {
    const r = bench(...args);
    assert.equal(r.code, 1, `${args.join(' ')}: ${r.stdout}`);
    assert.match(r.stderr, /^bench: /, args.join(' '));
  }
});
