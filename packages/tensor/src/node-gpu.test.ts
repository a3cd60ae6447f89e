// Dawn in Node: a process that exits with its devices alive stops SwiftShader's threads first (a worker
// thread still running inside exit() crashed test processes with SIGSEGV now and then).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';

const CHILD = fileURLToPath(new URL('./testing/gpu-exit-child.ts', import.meta.url));

test('exiting with live devices destroys them first: the threads SwiftShader started are gone before exit()', async () => {
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', CHILD], { timeout: 120_000 });
  const seen = JSON.parse(stdout.trim().split('\n').at(-1)!) as { beforeGpu: number; withDevices: number; atExit: number };
  assert.ok(seen.withDevices > seen.beforeGpu, `the devices run threads of their own: ${JSON.stringify(seen)}`);
  assert.ok(seen.atExit <= seen.beforeGpu, `every thread the devices started has ended by the time the process exits: ${JSON.stringify(seen)}`);
});
