// One Vite multi-page build for the apps, the in-browser test pages and the benchmark page. Tests
// and `npm start` serve the built dist/ (e2e/build.ts rebuilds it when sources change).
import { resolve } from 'node:path';
import { defineConfig } from 'vite';

const root = import.meta.dirname;

export default defineConfig({
  root,
  clearScreen: false,
  logLevel: 'warn',
  worker: { format: 'es' },
  server: { host: '127.0.0.1', strictPort: false, fs: { allow: [root] } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // The benchmark page bundles TensorFlow.js (~1.2 MB) on purpose.
    chunkSizeWarningLimit: 2048,
    rollupOptions: {
      input: {
        trainer: resolve(root, 'apps/trainer/index.html'),
        volunteer: resolve(root, 'apps/volunteer/index.html'),
        contributors: resolve(root, 'apps/volunteer/contributors.html'),
        dashboard: resolve(root, 'apps/dashboard/index.html'),
        kernels: resolve(root, 'e2e/pages/kernels.html'),
        distributed: resolve(root, 'e2e/pages/distributed.html'),
        collective: resolve(root, 'e2e/pages/collective.html'),
        'bench-kernels': resolve(root, 'bench/pages/kernels.html'),
      },
    },
  },
});
