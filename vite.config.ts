// Two Vite multi-page builds from one config. The default mode builds the apps into dist/, which is
// all the production server serves. `--mode pages` builds the in-browser test pages and the TF.js
// benchmark page into dist-pages/, which only tests and benchmarks serve (with dist/ beside it).
// @tabfleet/headless's ensureBuilt rebuilds either when its sources change.
import { resolve } from 'node:path';
import { defineConfig, type Plugin } from 'vite';

const root = import.meta.dirname;

const APPS = {
  trainer: 'apps/trainer/index.html',
  volunteer: 'apps/volunteer/index.html',
  contributors: 'apps/volunteer/contributors.html',
  dashboard: 'apps/dashboard/index.html',
  'dashboard-api': 'apps/dashboard/api.html',
  // The contribute widget: the frame other sites embed, and the script that defines its element,
  // served at a fixed path (EMBED_SCRIPT) because site owners paste it into their pages.
  embed: 'apps/embed/index.html',
  'embed-element': 'apps/embed/element.ts',
};
const EMBED_SCRIPT = 'embed/tabfleet.js';

const TEST_PAGES = {
  kernels: 'e2e/pages/kernels.html',
  distributed: 'e2e/pages/distributed.html',
  collective: 'e2e/pages/collective.html',
  'bench-kernels': 'bench/pages/kernels.html',
};

/**
 * The head every app page shares (charset, viewport, no favicon request, the shared stylesheet),
 * written once here and put at the top of each app page's <head> before Vite bundles it; a page's
 * own <head> keeps only its title and its own stylesheet.
 */
const SHARED_HEAD = `
  <meta charset="utf-8" />
  <meta name="viewport" content="width=device-width, initial-scale=1" />
  <link rel="icon" href="data:," />
  <link rel="stylesheet" href="/apps/shared/base.css" />`;

function sharedAppHead(): Plugin {
  return {
    name: 'tabfleet-shared-app-head',
    transformIndexHtml: {
      order: 'pre',
      handler: (html, ctx) => (ctx.path.startsWith('/apps/') ? html.replace(/<head>/, `<head>${SHARED_HEAD}`) : html),
    },
  };
}

export default defineConfig(({ mode }) => {
  const pages = mode === 'pages';
  const inputs = pages ? TEST_PAGES : APPS;
  return {
    root,
    clearScreen: false,
    logLevel: 'warn',
    worker: { format: 'es' },
    plugins: [sharedAppHead()],
    build: {
      outDir: pages ? 'dist-pages' : 'dist',
      emptyOutDir: true,
      target: 'es2022',
      // The benchmark page bundles TensorFlow.js (~1.2 MB) on purpose.
      chunkSizeWarningLimit: pages ? 2048 : 500,
      rollupOptions: {
        input: Object.fromEntries(Object.entries(inputs).map(([name, file]) => [name, resolve(root, file)])),
        output: { entryFileNames: (chunk) => (chunk.name === 'embed-element' ? EMBED_SCRIPT : 'assets/[name]-[hash].js') },
      },
    },
  };
});
