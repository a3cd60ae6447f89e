import { test } from 'node:test';
import { HTTP_TARGETS } from './http-bodies';
import { assertTarget } from './target';

for (const t of HTTP_TARGETS) test(`fuzz http bodies: ${t.name}`, () => assertTarget(t));
