// The import rules of docs/ARCHITECTURE.md as a function over source texts, so scripts/layout.test.ts
// can check the real tree and show, on made-up files, that a wrong import is caught.
import { posix } from 'node:path';

export interface Workspace {
  /** Folder, as ARCHITECTURE.md lists it (`packages/nn`, `server`). */
  dir: string;
  name: string;
  /** package.json `exports`: subpath → file. */
  exports: Record<string, string>;
  dependencies: string[];
  devDependencies: string[];
}

export interface SourceFile {
  /** Repository-relative, with forward slashes. */
  path: string;
  text: string;
}

/** The numbered list of ARCHITECTURE.md: "1. `packages/protocol` — …" → ['packages/protocol', …]. */
export function parseOrder(markdown: string): string[] {
  return [...markdown.matchAll(/^\d+\.\s+`([^`]+?)\/?`/gm)].map((m) => m[1]);
}

/** Static imports, re-exports, side-effect imports and dynamic imports with a literal specifier. */
export function importSpecifiers(text: string): string[] {
  const re = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|(?:^|\n)\s*import\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;
  return [...text.matchAll(re)].map((m) => m[1] ?? m[2] ?? m[3]);
}

function packageNameOf(spec: string): string {
  const parts = spec.split('/');
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

const isTest = (path: string) => path.endsWith('.test.ts') || path.includes('/test/');

/** Browser code may use only the packages above the first Node-only one. */
const FIRST_NODE_ONLY = 'server';
/** Product code that must not import tests or benchmarks. */
const PRODUCT = new Set(['apps', 'scripts']);

export function checkImports(opts: {
  order: string[];
  workspaces: Workspace[];
  files: SourceFile[];
  /** Third-party modules the root package.json declares (for apps, e2e, bench, scripts). */
  externalAllowedAtRoot: Set<string>;
  nodeBuiltins: Set<string>;
}): string[] {
  const { order, workspaces, files } = opts;
  const rank = (dir: string) => order.indexOf(dir);
  const owner = (path: string) => order.filter((d) => path === d || path.startsWith(`${d}/`)).sort((a, b) => b.length - a.length)[0];
  const wsByDir = new Map(workspaces.map((w) => [w.dir, w]));
  const wsByName = new Map(workspaces.map((w) => [w.name, w]));
  const out: string[] = [];

  for (const f of files) {
    const from = owner(f.path);
    if (from === undefined) continue;
    const self = wsByDir.get(from);
    const test = isTest(f.path);
    for (const spec of importSpecifiers(f.text)) {
      const bad = (why: string) => out.push(`${f.path}: '${spec}' ${why}`);
      if (spec.startsWith('.')) {
        const target = posix.normalize(posix.join(posix.dirname(f.path), spec));
        const to = owner(target);
        if (to === from) continue;
        if (to === undefined) bad('leaves every listed folder');
        else if (wsByDir.has(to)) bad(`reaches into ${to} by path: import ${wsByDir.get(to)!.name} instead`);
        else if (self) bad(`reaches out of package ${self.name} into ${to}`);
        else if (PRODUCT.has(from) && (to === 'e2e' || to === 'bench')) bad(`is test or benchmark code; ${from} is product code`);
        else if (from === 'bench' && to === 'e2e') bad('is e2e code: bench never imports e2e (shared helpers live in a package\'s testing subpath)');
        else if (isTest(target)) bad('imports a test file');
        else if (rank(to) > rank(from) && from !== 'bench') bad(`imports ${to}, which is below ${from} in ARCHITECTURE.md`);
        continue;
      }
      const name = packageNameOf(spec);
      const ws = wsByName.get(name);
      if (ws) {
        const subpath = spec === name ? '.' : `.${spec.slice(name.length)}`;
        if (!(subpath in ws.exports)) bad(`is not exported by ${name} (exports: ${Object.keys(ws.exports).join(', ')})`);
        if (self) {
          if (ws === self) bad('imports its own package by name');
          else if (rank(ws.dir) > rank(from)) bad(`imports ${ws.dir}, which is below ${from} in ARCHITECTURE.md`);
          else if (!self.dependencies.includes(name) && !(test && self.devDependencies.includes(name))) bad(`is not declared in ${from}/package.json`);
        } else if (from === 'apps' && rank(ws.dir) >= rank(FIRST_NODE_ONLY)) bad(`is Node-only; apps run in the browser`);
        continue;
      }
      if (spec.startsWith('node:') || opts.nodeBuiltins.has(name)) continue;
      if (self) {
        if (!self.dependencies.includes(name) && !(test && self.devDependencies.includes(name))) bad(`is not declared in ${from}/package.json`);
      } else if (!opts.externalAllowedAtRoot.has(name)) bad('is not declared in the root package.json');
    }
  }
  return out;
}

/** Hand-written source: what the budgets apply to. */
export const SOURCE_EXTENSIONS = /\.(ts|mts|mjs|js|wgsl|html|css)$/;
/** Files a generator writes, exempt by name (scripts/gen-shaders.mjs, scripts/gen-matmul-unrolled.ts). */
export const GENERATED = [/\.generated\.ts$/, /^shaders\/matmul_unrolled\.wgsl$/];
export const MAX_FILE_LINES = 800;
export const MAX_LINE_CHARS = 200;

/** Files over MAX_FILE_LINES lines and lines over MAX_LINE_CHARS characters (generated files exempt). */
export function checkBudgets(files: SourceFile[]): string[] {
  const out: string[] = [];
  for (const f of files) {
    if (!SOURCE_EXTENSIONS.test(f.path) || GENERATED.some((g) => g.test(f.path))) continue;
    const lines = f.text.split('\n');
    if (lines.at(-1) === '') lines.pop();
    if (lines.length > MAX_FILE_LINES) out.push(`${f.path}: ${lines.length} lines (at most ${MAX_FILE_LINES}): split it by concern`);
    lines.forEach((line, i) => {
      if (line.length > MAX_LINE_CHARS) out.push(`${f.path}:${i + 1}: ${line.length} characters (at most ${MAX_LINE_CHARS})`);
    });
  }
  return out;
}

/** Code that runs in a browser: the packages above the first Node-only one, the apps, and the test and benchmark pages. */
function runsInBrowser(path: string, order: string[]): boolean {
  if (path.startsWith('apps/') || path.startsWith('e2e/pages/') || path.startsWith('bench/pages/')) return true;
  const dir = order.find((d) => d.startsWith('packages/') && path.startsWith(`${d}/`));
  return dir !== undefined && order.indexOf(dir) < order.indexOf(FIRST_NODE_ONLY) && dir !== 'packages/headless';
}

/**
 * Where a browser package may use Node: its tests, its `testing` entry (the worker runtime in Node), and
 * files named for Node (`node.ts`, `node-*.ts`, `*-node.ts`) behind a subpath of their own. Anywhere else
 * in browser code, a `node:` module, a builtin or a Node subpath (`@tabfleet/data/node`,
 * `@tabfleet/collective/webrtc-node`) would break the page bundle.
 */
export function checkNodeOnly(opts: { order: string[]; files: SourceFile[]; nodeBuiltins: Set<string> }): string[] {
  const out: string[] = [];
  const nodeNamed = (path: string) => /\/(node|node-[\w-]+|[\w-]+-node|testing)\.m?ts$/.test(path) || path.includes('/testing/');
  for (const f of opts.files) {
    if (!runsInBrowser(f.path, opts.order) || isTest(f.path) || nodeNamed(f.path)) continue;
    for (const spec of importSpecifiers(f.text)) {
      const nodeOnly = spec.startsWith('node:') || opts.nodeBuiltins.has(packageNameOf(spec)) || /^@tabfleet\/[\w-]+\/([\w-]+-)?node$/.test(spec);
      if (nodeOnly) out.push(`${f.path}: '${spec}' is Node-only; this file runs in the browser (Node code goes in a node-named file behind its own subpath, or in testing)`);
    }
  }
  return out;
}
