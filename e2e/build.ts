// Builds the pages with Vite when dist/ is missing or older than any source, so browser tests and
// `npm start` always serve what the code says.
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build } from 'vite';

export const repoRoot = resolve(import.meta.dirname, '..');
export const distDir = join(repoRoot, 'dist');
const stampFile = join(distDir, '.build-stamp');
const sources = ['apps', 'packages', 'shaders', 'e2e/pages', 'bench/pages', 'vite.config.ts'];

function newestMtime(p: string): number {
  if (!existsSync(p)) return 0;
  const st = statSync(p);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const name of readdirSync(p)) {
    if (name === 'node_modules' || name === 'dist') continue;
    newest = Math.max(newest, newestMtime(join(p, name)));
  }
  return newest;
}

export async function ensureBuilt(log: (s: string) => void = () => {}): Promise<void> {
  const newestSource = Math.max(...sources.map((s) => newestMtime(join(repoRoot, s))));
  if (existsSync(stampFile) && statSync(stampFile).mtimeMs >= newestSource) return;
  log('[build] building pages with Vite');
  await build({ configFile: join(repoRoot, 'vite.config.ts'), logLevel: 'warn' });
  writeFileSync(stampFile, new Date().toISOString());
}
