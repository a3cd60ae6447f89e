import assert from 'node:assert/strict';
import { test } from 'node:test';
import { benchCommand, missingRecord, runRecord } from './machine';

test('benchCommand repeats the options a run was given, defaults left out', () => {
  assert.equal(benchCommand('kernels', { runs: 5, quick: false }), 'npm run bench -- kernels');
  assert.equal(benchCommand('groups', { runs: 2, quick: true }), 'npm run bench -- groups --quick');
  assert.equal(benchCommand('byzantine', { runs: 3, quick: false, only: ['robust', 'overhead'], out: '/tmp/b.json' }), 'npm run bench -- byzantine --runs 3 --only robust,overhead --out /tmp/b.json');
});

test('benchCommand leads with the TABFLEET_BENCH_* knobs the run was given, quoted where a shell needs it', () => {
  const env = { TABFLEET_BENCH_COORDINATOR_STEPS: '5000,10000', TABFLEET_BENCH_COORDINATOR_SERVER_NODE_ARGS: "--trace-gc --title=it's", PATH: '/usr/bin', TABFLEET_BROWSER_WS: 'ws://x' };
  assert.equal(benchCommand('coordinator', { runs: 5, quick: false }, env),
    "TABFLEET_BENCH_COORDINATOR_SERVER_NODE_ARGS='--trace-gc --title=it'\\''s' TABFLEET_BENCH_COORDINATOR_STEPS=5000,10000 npm run bench -- coordinator");
});

test('runRecord names the commit, the start, the command, the machine and the duration', () => {
  const started = Date.now() - 1_500;
  const r = runRecord(started, 'npm run bench -- x');
  assert.match(r.commit ?? '', /^[0-9a-f]{40}(-dirty)?$/);
  assert.equal(r.date, new Date(started).toISOString());
  assert.equal(r.command, 'npm run bench -- x');
  assert.ok(r.machine.cores >= 1);
  assert.ok(r.durationMs >= 1_500 && r.durationMs < 60_000, `${r.durationMs}`);
  assert.deepEqual(missingRecord(r), [], 'what runRecord writes passes the check of every results file');
});
