// `npm run build [-- --pages]`: builds the apps into dist/ (what the server serves), and with --pages
// the test and benchmark pages into dist-pages/. Nothing happens when a build is newer than its sources.
import { ensureBuilt } from '@tabfleet/headless';

await ensureBuilt('apps', console.log);
if (process.argv.includes('--pages')) await ensureBuilt('pages', console.log);
