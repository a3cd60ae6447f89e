// Builds the pages with Vite when a build is missing or older than any of its sources, so browser
// tests and `npm start` always serve what the code says. Two builds (vite.config.ts): the apps into
// dist/ (what the production server serves) and the test and benchmark pages into dist-pages/.
import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build } from 'vite';

export const repoRoot = resolve(import.meta.dirname, '../../..');
export const FASHION_MNIST_DIR = process.env.FASHION_MNIST_DIR ?? '/usr/share/datasets/fashion-mnist';

export type BuildTarget = 'apps' | 'pages';

const TARGETS: Record<BuildTarget, { outDir: string; mode: string; sources: string[] }> = {
  apps: { outDir: join(repoRoot, 'dist'), mode: 'production', sources: ['apps', 'packages', 'shaders', 'vite.config.ts'] },
  pages: { outDir: join(repoRoot, 'dist-pages'), mode: 'pages', sources: ['packages', 'shaders', 'e2e/pages', 'bench/pages', 'vite.config.ts'] },
};

/** Where a build's files are served from. */
export function builtDir(target: BuildTarget): string {
  return TARGETS[target].outDir;
}

function newestMtime(p: string): number {
  if (!existsSync(p)) return 0;
  const st = statSync(p);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const name of readdirSync(p)) {
    if (name === 'node_modules' || name === 'dist' || name === 'dist-pages') continue;
    newest = Math.max(newest, newestMtime(join(p, name)));
  }
  return newest;
}

export async function ensureBuilt(target: BuildTarget = 'apps', log: (s: string) => void = () => {}): Promise<void> {
  const { outDir, mode, sources } = TARGETS[target];
  const stampFile = join(outDir, '.build-stamp');
  const newestSource = Math.max(...sources.map((s) => newestMtime(join(repoRoot, s))));
  if (existsSync(stampFile) && statSync(stampFile).mtimeMs >= newestSource) return;
  log(`[build] building the ${target} with Vite`);
  await build({ configFile: join(repoRoot, 'vite.config.ts'), mode, logLevel: 'warn' });
  writeFileSync(stampFile, new Date().toISOString());
}
