// matmul_unrolled's workgroup shape: fitted to the output's tiles (8×16 each), then shrunk until
// there are enough workgroups to share across SwiftShader's threads.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { unrolledWorkgroup } from './matmul';

test('a product one tile wide gives its lanes to the rows, and no lane lies past the output', () => {
  // Attention's per-head products of the char transformer (head size 16, 64 positions, 64 heads·batch).
  assert.deepEqual(unrolledWorkgroup({ M: 64, N: 16, batch: 64 }), [1, 8]);
  assert.deepEqual(unrolledWorkgroup({ M: 64, N: 64, batch: 64 }), [4, 8]);
  // Two tiles wide and few rows: 2 × 2 lanes, not 16 × 4.
  assert.deepEqual(unrolledWorkgroup({ M: 12, N: 20, batch: 1 }), [2, 2]);
});

test('wide products keep 16 × 4 lanes, shrunk towards 4 × 4 until 32 workgroups share the threads', () => {
  assert.deepEqual(unrolledWorkgroup({ M: 1024, N: 1024, batch: 1 }), [16, 4]);
  // The MLP's [128, 256] products (measured 15 ms at 4 × 4 against 21 ms at 16 × 4).
  assert.deepEqual(unrolledWorkgroup({ M: 128, N: 256, batch: 1 }), [4, 4]);
  assert.deepEqual(unrolledWorkgroup({ M: 1024, N: 64, batch: 1 }), [4, 4]);
});
