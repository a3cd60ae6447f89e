// Keeps the house as docs/ARCHITECTURE.md draws it: every import is checked against the numbered
// list there. A package imports only packages above it and declares them (and every third-party
// module) in its package.json; nothing reaches into another package's files by path or imports a
// subpath its package does not export; browser code does not import the server or the launchers;
// product code does not import tests or benchmarks; and the server never loads the tensor package.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { test } from 'node:test';
import { checkBudgets, checkImports, checkNodeOnly, importSpecifiers, MAX_FILE_LINES, parseOrder, SOURCE_EXTENSIONS, type SourceFile, type Workspace } from './layout';

const root = resolve(import.meta.dirname, '..');

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist' || name === 'dist-pages' || name === 'results') continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) sourceFiles(p, out);
    else if (SOURCE_EXTENSIONS.test(name) && !name.endsWith('.d.ts') && !name.endsWith('.d.mts')) out.push(p);
  }
  return out;
}

function loadTree(): { order: string[]; workspaces: Workspace[]; files: SourceFile[] } {
  const order = parseOrder(readFileSync(join(root, 'docs/ARCHITECTURE.md'), 'utf8'));
  const workspaces: Workspace[] = [];
  for (const dir of order) {
    let pkg: { name: string; exports?: Record<string, string> | string; dependencies?: Record<string, string>; devDependencies?: Record<string, string> };
    try {
      pkg = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8'));
    } catch {
      continue; // apps, e2e, bench, scripts: folders of the root package, not workspace packages
    }
    workspaces.push({
      dir, name: pkg.name,
      exports: typeof pkg.exports === 'string' ? { '.': pkg.exports } : pkg.exports ?? {},
      dependencies: Object.keys(pkg.dependencies ?? {}), devDependencies: Object.keys(pkg.devDependencies ?? {}),
    });
  }
  const files = [...order, 'shaders'].flatMap((dir) => sourceFiles(join(root, dir)).map((abs) => ({ path: relative(root, abs).split(sep).join('/'), text: readFileSync(abs, 'utf8') })));
  return { order, workspaces, files };
}

const rootPkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const externalAllowedAtRoot = new Set([...Object.keys(rootPkg.devDependencies ?? {}), ...Object.keys(rootPkg.dependencies ?? {})]);
const nodeBuiltins = new Set([...builtinModules, ...builtinModules.map((m) => `node:${m}`)]);

test('ARCHITECTURE.md lists every workspace package and folder of code, in an order', () => {
  const { order, workspaces } = loadTree();
  const declared = (rootPkg.workspaces as string[]).flatMap((w) => (w.endsWith('/*') ? readdirSync(join(root, w.slice(0, -2))).map((d) => `${w.slice(0, -2)}/${d}`) : [w]));
  for (const w of declared) assert.ok(order.includes(w), `${w} is a workspace but ARCHITECTURE.md does not list it`);
  assert.deepEqual(workspaces.map((w) => w.dir).sort(), declared.sort(), 'every listed package has a package.json');
  for (const dir of ['apps', 'e2e', 'bench', 'scripts']) assert.ok(order.includes(dir), `ARCHITECTURE.md lists ${dir}`);
});

const scripts = (files: SourceFile[]) => files.filter((f) => /\.(ts|mts|mjs)$/.test(f.path));

test('every import follows ARCHITECTURE.md', () => {
  const tree = loadTree();
  const violations = checkImports({ ...tree, files: scripts(tree.files), externalAllowedAtRoot, nodeBuiltins });
  assert.deepEqual(violations, [], `\n${violations.join('\n')}`);
});

test('a wrong import is caught: each rule on a made-up file', () => {
  const tree = loadTree();
  const cases: [SourceFile, RegExp][] = [
    [{ path: 'packages/nn/src/bad.ts', text: "import { startServer } from '@tabfleet/server';" }, /below packages\/nn/],
    [{ path: 'packages/nn/src/bad.test.ts', text: "import { Ring } from '@tabfleet/collective';" }, /below packages\/nn/],
    [{ path: 'packages/nn/src/bad.ts', text: "import { gaussianBlobs } from '@tabfleet/data';" }, /not declared in packages\/nn\/package.json/],
    [{ path: 'e2e/bad.test.ts', text: "import { Ring } from '../packages/collective/src/ring';" }, /reaches into packages\/collective by path/],
    [{ path: 'server/src/bad.ts', text: "export { x } from '../../packages/data/src/idx';" }, /reaches into packages\/data by path/],
    [{ path: 'e2e/bad.test.ts', text: "import { x } from '@tabfleet/tensor/src/random';" }, /not exported by @tabfleet\/tensor/],
    [{ path: 'scripts/bad.ts', text: "import { x } from '../e2e/pages/collective';" }, /scripts is product code/],
    [{ path: 'apps/volunteer/bad.ts', text: "const s = await import('@tabfleet/server/static');" }, /apps run in the browser/],
    [{ path: 'packages/protocol/src/bad.ts', text: "import left from 'left-pad';" }, /not declared in packages\/protocol\/package.json/],
    [{ path: 'bench/bad.ts', text: "import { x } from '../e2e/pages/collective';" }, /bench never imports e2e/],
  ];
  for (const [file, why] of cases) {
    const violations = checkImports({ ...tree, files: [file], externalAllowedAtRoot, nodeBuiltins });
    assert.equal(violations.length, 1, `${file.path}: ${file.text} → ${JSON.stringify(violations)}`);
    assert.match(violations[0], why);
  }
});

test('the server does not load the tensor package (or any GPU code)', () => {
  const { files, workspaces } = loadTree();
  const byPath = new Map(files.map((f) => [f.path, f]));
  const entry = (spec: string): string | null => {
    const ws = workspaces.find((w) => spec === w.name || spec.startsWith(`${w.name}/`));
    if (!ws) return null;
    const target = ws.exports[spec === ws.name ? '.' : `.${spec.slice(ws.name.length)}`];
    return target ? join(ws.dir, target).split(sep).join('/') : null;
  };
  const seen = new Set<string>();
  const stack = ['server/src/main.ts', 'server/src/app.ts'];
  while (stack.length) {
    const file = stack.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    const f = byPath.get(file);
    if (!f) continue;
    for (const spec of importSpecifiers(f.text)) {
      const next = spec.startsWith('.') ? resolveRelative(file, spec, byPath) : entry(spec);
      if (next) stack.push(next);
    }
  }
  const gpu = [...seen].filter((f) => f.startsWith('packages/tensor/') || f.startsWith('packages/nn/'));
  assert.deepEqual(gpu, [], 'files the server loads');
  assert.ok(seen.has('packages/data/src/index.ts') && seen.has('packages/protocol/src/random.ts'), 'the walk follows package entries');
});

function resolveRelative(from: string, spec: string, files: Map<string, SourceFile>): string | null {
  const base = join(dirname(from), spec).split(sep).join('/');
  for (const c of [base, `${base}.ts`, `${base}/index.ts`, base.replace(/\.m?js$/, '.ts')]) if (files.has(c)) return c;
  return null;
}

test('budgets: no hand-written source file over 800 lines, no line over 200 characters', () => {
  const { files } = loadTree();
  assert.ok(files.some((f) => f.path === 'server/src/coordinator/job-coordinator.ts'), 'the walk reaches the server');
  assert.ok(files.some((f) => f.path.endsWith('.wgsl')) && files.some((f) => f.path.endsWith('.html')), 'the walk reaches shaders and pages');
  assert.deepEqual(checkBudgets(files), [], 'split long files by concern; wrap long lines');
});

test('the round clock stays small: job-coordinator.ts at most 600 lines', () => {
  const text = readFileSync(join(root, 'server/src/coordinator/job-coordinator.ts'), 'utf8');
  const lines = text.split('\n').length - 1;
  assert.ok(lines <= 600, `job-coordinator.ts has ${lines} lines: its concerns live in the modules beside it`);
});

test('a budget is caught: a long file, a long line; generated files are exempt', () => {
  const long = Array.from({ length: MAX_FILE_LINES + 1 }, () => 'x;').join('\n');
  assert.match(checkBudgets([{ path: 'server/src/big.ts', text: long }]).join(), /801 lines/);
  assert.match(checkBudgets([{ path: 'apps/shared/a.css', text: `a{}\n${'b'.repeat(201)}\n` }]).join(), /a\.css:2: 201 characters/);
  assert.deepEqual(checkBudgets([{ path: 'packages/tensor/src/shaders.generated.ts', text: long }, { path: 'shaders/matmul_unrolled.wgsl', text: long }]), []);
  assert.deepEqual(checkBudgets([{ path: 'server/src/ok.ts', text: `${'c'.repeat(200)}\n` }]), []);
});

test('Node-only imports only where the layout allows them', () => {
  const tree = loadTree();
  assert.deepEqual(checkNodeOnly({ order: tree.order, files: scripts(tree.files), nodeBuiltins }), []);
  const caught = (path: string, text: string) => checkNodeOnly({ order: tree.order, files: [{ path, text }], nodeBuiltins }).length;
  assert.equal(caught('packages/collective/src/bad.ts', "import { readFileSync } from 'node:fs';"), 1);
  assert.equal(caught('apps/volunteer/bad.ts', "import os from 'os';"), 1);
  assert.equal(caught('packages/worker/src/bad.ts', "import { x } from '@tabfleet/data/node';"), 1);
  assert.equal(caught('e2e/pages/bad.ts', "import { w } from '@tabfleet/collective/webrtc-node';"), 1);
  assert.equal(caught('packages/data/src/node.ts', "import { readFileSync } from 'node:fs';"), 0, 'a node-named file');
  assert.equal(caught('packages/worker/src/testing.ts', "import { x } from '@tabfleet/data/node';"), 0, 'a testing entry');
  assert.equal(caught('packages/nn/src/a.test.ts', "import { x } from 'node:test';"), 0, 'a test');
  assert.equal(caught('server/src/a.ts', "import { x } from 'node:fs';"), 0, 'the server runs in Node');
});
