// The command line itself: help that documents the exit codes, and usage errors (unknown command,
// unknown option, missing argument) that exit 2 and, with --json, print one JSON document on stdout.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { main } from './main';
import type { Io } from './output';

async function run(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = new PassThrough(), stderr = new PassThrough();
  const io: Io = { stdout, stderr, stdin: new PassThrough(), env: {} };
  const code = await main(argv, io);
  return { code, stdout: (stdout.read() ?? '').toString(), stderr: (stderr.read() ?? '').toString() };
}

test('--help lists every command and documents exit codes, environment and a private CA', async () => {
  const { code, stdout } = await run(['--help']);
  assert.equal(code, 0);
  for (const c of ['login', 'submit', 'ls', 'watch', 'stop', 'download', 'upload']) assert.match(stdout, new RegExp(`^ {2}${c} `, 'm'));
  for (const [n, what] of [[0, 'ok'], [1, 'failed'], [2, 'bad'], [3, 'token'], [4, 'not found'], [5, 'network']] as const) {
    assert.match(stdout, new RegExp(`^ {2}${n} {2}.*${what}`, 'm'));
  }
  assert.match(stdout, /NODE_EXTRA_CA_CERTS/);
  assert.match(stdout, /TABFLEET_SERVER/);
  const sub = await run(['watch', '--help']);
  assert.equal(sub.code, 0);
  assert.match(sub.stdout, /Usage: tabfleet watch ID/);
  assert.match(sub.stdout, /every --interval seconds/);
});

test('usage errors exit 2; with --json the error is the one document on stdout', async () => {
  const bare = await run([]);
  assert.equal(bare.code, 2);
  assert.equal(bare.stdout, '');
  const unknown = await run(['frobnicate', '--json']);
  assert.equal(unknown.code, 2);
  assert.equal(JSON.parse(unknown.stdout).error.kind, 'usage');
  assert.match(unknown.stderr, /unknown command "frobnicate"/);
  const option = await run(['ls', '--colour']);
  assert.equal(option.code, 2);
  assert.match(option.stderr, /--colour/);
  const noArg = await run(['watch', '--json']);
  assert.equal(noArg.code, 2);
  assert.deepEqual(Object.keys(JSON.parse(noArg.stdout)), ['error']);
  const interval = await run(['watch', 'job-1', '--interval', 'soon']);
  assert.equal(interval.code, 2);
});
