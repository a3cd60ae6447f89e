import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseContentRange } from './checkpoint-uploads';

test('Content-Range of a chunk: bytes START-END/TOTAL, else a clear refusal', () => {
  assert.deepEqual(parseContentRange('bytes 0-99/1000'), { start: 0, end: 99, total: 1000 });
  assert.throws(() => parseContentRange(undefined), /needs Content-Range: bytes START-END\/TOTAL/);
  assert.throws(() => parseContentRange('bytes 0-99/*'), /needs Content-Range/);
  assert.throws(() => parseContentRange('bytes 50-10/100'), /its end is before its start/);
});
