// `npm run workers -- --server URL --count N [--job ID]`: N headless Chromium volunteers on a
// server's volunteer page; prints their status until Ctrl-C, then leaves cleanly.
import { parseArgs } from 'node:util';
import { ensureBuilt, formatStatus, launchWorkers } from '@tabfleet/headless';

const HELP = `Usage: npm run workers -- --server URL [--count N] [--job ID] [--every S]

Launches N headless Chromium tabs (WebGPU; SwiftShader without a GPU) on URL/apps/volunteer/, presses
Contribute in each, and prints their status every S seconds (default 5). Ctrl-C closes the tabs,
which tells the server they left.`;

const { values } = parseArgs({
  options: { server: { type: 'string' }, count: { type: 'string', default: '1' }, job: { type: 'string' }, every: { type: 'string', default: '5' }, help: { type: 'boolean', default: false } },
});
if (values.help) {
  console.log(HELP);
  process.exit(0);
}
const count = Number(values.count), every = Number(values.every);
if (!values.server || !/^https?:\/\//.test(values.server) || !Number.isInteger(count) || count < 1 || count > 64 || !(every > 0)) {
  console.error(`need --server http://host:port, --count 1..64 and --every > 0\n\n${HELP}`);
  process.exit(2);
}
await ensureBuilt('apps', console.log);
const workers = await launchWorkers({ serverUrl: values.server.replace(/\/$/, ''), count, job: values.job, log: console.log });
const timer = setInterval(async () => {
  (await workers.statuses()).forEach((s, i) => console.log(formatStatus(i, s)));
}, every * 1000);
let stopping = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, async () => {
    if (stopping) process.exit(1);
    stopping = true;
    clearInterval(timer);
    console.log('\nstopping workers…');
    await workers.stop();
    process.exit(0);
  });
}
