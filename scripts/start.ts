// `npm start`: builds the pages, serves them, and trains the default Fashion-MNIST job in a local
// headless Chromium tab on WebGPU, printing progress. (The coordinator issue turns this into the
// full system: server, SQLite, several workers and the dashboard.)
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { ensureBuilt } from '../e2e/build';
import { CHROMIUM_ARGS, CHROMIUM_PATH } from '../e2e/shared-browser.mjs';
import { startStaticServer } from '../e2e/static-server';

const HELP = `Usage: npm start -- [options]

Trains a model on Fashion-MNIST in a local headless Chromium tab (WebGPU; SwiftShader without a GPU)
and serves the trainer page so you can watch or train in your own browser.

Options:
  --port N        HTTP port (default 8080; 0 picks a free one)
  --preset NAME   mlp-fashion (default), cnn-fashion or transformer-char
  --epochs N      epochs to train (default 2)
  --no-train      only serve the pages
  --help          show this help`;

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '8080' },
    preset: { type: 'string', default: 'mlp-fashion' },
    epochs: { type: 'string', default: '2' },
    'no-train': { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  console.log(HELP);
  process.exit(0);
}
const presets = ['mlp-fashion', 'cnn-fashion', 'transformer-char'];
if (!presets.includes(values.preset!)) {
  console.error(`unknown preset ${values.preset}; choose one of ${presets.join(', ')}`);
  process.exit(2);
}
const port = Number(values.port), epochs = Number(values.epochs);
if (!Number.isInteger(port) || port < 0 || port > 65535 || !Number.isInteger(epochs) || epochs < 1) {
  console.error('--port must be 0..65535 and --epochs a positive integer');
  process.exit(2);
}

await ensureBuilt(console.log);
const { server, url } = await startStaticServer(port);
const pageUrl = `${url}/apps/trainer/index.html`;
console.log(`\ntabfleet trainer page: ${pageUrl}\n`);

const browser = values['no-train'] ? null : await chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: CHROMIUM_ARGS });
let stopping = false;
async function shutdown(code: number): Promise<never> {
  if (!stopping) {
    stopping = true;
    console.log('\nstopping…');
    await browser?.close().catch(() => {});
    await new Promise((r) => server.close(r));
  }
  process.exit(code);
}
process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));

if (browser) {
  const page = await browser.newPage();
  page.on('console', (m) => {
    const text = m.text();
    if (!text.startsWith('[progress] ')) return;
    const p = JSON.parse(text.slice(11));
    const acc = p.testAccuracy !== undefined ? `  test accuracy ${(100 * p.testAccuracy).toFixed(2)}%` : '';
    console.log(`epoch ${p.epoch + 1}  step ${p.step}/${p.totalSteps}  loss ${p.loss.toFixed(4)}  ${p.samplesPerSec.toFixed(0)} samples/s${acc}`);
  });
  page.on('pageerror', (e) => console.error(`[page error] ${e.message}`));
  await page.goto(pageUrl);
  const info = await page.evaluate(() => window.tabfleetTrainer.ready);
  console.log(`headless worker on ${info.description}; training ${values.preset} for ${epochs} epoch(s)`);
  const report = await page.evaluate(
    ({ preset, epochs }) => window.tabfleetTrainer.run(window.tabfleetTrainer.defaultConfig(preset as never, epochs)),
    { preset: values.preset!, epochs },
  );
  console.log(`\ndone: ${report.steps} steps, ${report.msPerStep.toFixed(1)} ms/step, test accuracy ${(100 * report.testAccuracy).toFixed(2)}% on ${report.testCount} test images`);
  console.log(`the trainer page stays up at ${pageUrl} — Ctrl-C to stop`);
}
