import { test } from 'node:test';
import { QUANTIZED_TARGETS } from './quantized';
import { assertTarget } from './target';

for (const t of QUANTIZED_TARGETS) test(`fuzz quantized: ${t.name}`, () => assertTarget(t));
