import { test } from 'node:test';
import { WIRE_SIZE_TARGETS } from './wire-size';
import { assertTarget } from './target';

for (const t of WIRE_SIZE_TARGETS) test(`fuzz event size: ${t.name}`, () => assertTarget(t));
