import { test } from 'node:test';
import { FRAME_TARGETS } from './frames';
import { assertTarget } from './target';

for (const t of FRAME_TARGETS) test(`fuzz frames: ${t.name}`, () => assertTarget(t));
