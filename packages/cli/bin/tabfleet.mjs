#!/usr/bin/env node
// The `tabfleet` command: the CLI is TypeScript like the rest of the repository, so tsx's loader is
// registered before its entry is imported (no build step between an edit and `npx tabfleet`).
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/main.ts');
process.exitCode = await main(process.argv.slice(2));
