import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FLAGS, generateMatmulUnrolled, LANES, TILE_COLS, TILE_ROWS } from './gen-matmul-unrolled';

test('shaders/matmul_unrolled.wgsl is what its generator writes', () => {
  const committed = readFileSync(join(import.meta.dirname, '..', 'shaders', 'matmul_unrolled.wgsl'), 'utf8');
  assert.equal(committed, generateMatmulUnrolled(), 'run: node --import tsx scripts/gen-matmul-unrolled.ts');
});

test('the matmul wrapper dispatches with the tile size, lanes and flag bits of the generator', () => {
  const wrapper = readFileSync(join(import.meta.dirname, '..', 'packages/tensor/src/webgpu/kernels/matmul.ts'), 'utf8');
  assert.match(wrapper, new RegExp(`UNROLLED_TILE_ROWS = ${TILE_ROWS}, UNROLLED_TILE_COLS = ${TILE_COLS}, UNROLLED_LANES = ${LANES};`));
  const flags = `UNROLLED_FLAGS = { hasBias: ${FLAGS.hasBias}, biasPerRow: ${FLAGS.biasPerRow}, relu: ${FLAGS.relu} };`;
  assert.ok(wrapper.includes(flags), flags);
});
