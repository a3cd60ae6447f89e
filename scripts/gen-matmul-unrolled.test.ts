import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateMatmulUnrolled } from './gen-matmul-unrolled';

test('shaders/matmul_unrolled.wgsl is what its generator writes', () => {
  const committed = readFileSync(join(import.meta.dirname, '..', 'shaders', 'matmul_unrolled.wgsl'), 'utf8');
  assert.equal(committed, generateMatmulUnrolled(), 'run: node --import tsx scripts/gen-matmul-unrolled.ts');
});
