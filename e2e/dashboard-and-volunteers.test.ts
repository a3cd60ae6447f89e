// The surfaces people touch, end to end: a researcher signs in and submits a job through the form,
// three volunteer tabs join with the Contribute button, the charts update live, one tab closes
// mid-job and the others finish it at its accuracy target, and the checkpoint downloaded from the
// dashboard gives, on the CPU reference, the accuracy the dashboard shows. Screenshots of both pages
// go to e2e/screenshots/.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fashionMnistFromDisk } from '@tabfleet/distributed/node';
import { sequentialBatches } from '@tabfleet/data';
import type { OpenedPage } from '@tabfleet/headless';
import { createModel, evaluate, PRESETS } from '@tabfleet/nn';
import { CpuBackend } from '@tabfleet/tensor';
import { waitFor } from '@tabfleet/server/testing';
import { appsSession, SHOTS } from './apps-session';

const session = appsSession();
const { open, shot } = session;

test('a researcher submits a job from the dashboard, three tabs train it, one leaves, the rest reach the target', { timeout: 15 * 60_000 }, async () => {
  const dash = await open(`${session.server.url}/apps/dashboard/`);
  const d = dash.page;
  await d.waitForSelector('#signin:not([hidden])');
  await shot(d, 'dashboard-signin');
  await d.fill('#token', 'wrong-token');
  await d.click('#signin-form button');
  await d.waitForSelector('#signin-error:not([hidden])');
  await d.fill('#token', 'test-token');
  await d.click('#signin-form button');
  await d.waitForSelector('#jobs-view:not([hidden])');

  // A first try the form refuses (more minimum than maximum workers), then a good one. Strategy, H,
  // learning rate and batch size are under "advanced".
  await d.click('#advanced summary');
  await d.selectOption('select[name=strategy]', 'localsgd');
  await d.fill('input[name=H]', '8');
  await d.fill('input[name=lr]', '0.05');
  await d.fill('input[name=batchSize]', '32');
  await d.fill('input[name=minWorkers]', '5');
  await d.fill('input[name=maxWorkers]', '3');
  // Room past the 0.82 target: the job stops as soon as its evaluators agree it is reached. (0.84
  // took 1280+ steps and 90 s; the lower target keeps the suite's budget and tests the same path.)
  await d.fill('input[name=targetSteps]', '1920');
  await d.fill('input[name=targetAccuracy]', '0.82');
  await d.click('#job-form button[type=submit]');
  await d.waitForSelector('#form-errors li');
  assert.match((await d.textContent('#form-errors')) ?? '', /minWorkers: must not exceed maxWorkers/);
  await shot(d, 'dashboard-form-errors');
  await d.fill('input[name=minWorkers]', '2');
  await d.fill('input[name=name]', 'e2e MLP');
  await d.click('#job-form button[type=submit]');
  await d.waitForSelector('#job-view:not([hidden])');
  const jobId = /#\/jobs\/([\w-]+)/.exec(d.url())![1];

  const tabs: OpenedPage[] = [];
  for (let i = 0; i < 3; i++) {
    const t = await open(`${session.server.url}/apps/volunteer/`);
    await t.page.evaluate(() => window.tabfleetVolunteer.ready);
    await t.page.click('#contribute');
    tabs.push(t);
  }
  await waitFor('the loss chart has points', async () => Number(await d.getAttribute('#loss-chart', 'data-points')) >= 3, 5 * 60_000, 500);
  await waitFor('the worker table lists three tabs', async () => (await d.$$('#workers tbody tr')).length === 3, 30_000, 250);
  // Each tab's reputation: validators confirm parts of its work as the rounds go (new tabs start on probation).
  await waitFor('a tab has verified work', async () => (await d.$$eval('#workers [data-reputation]',
    (cells) => cells.map((c) => c.textContent ?? ''))).some((t) => /^[1-9]\d* verified/.test(t)), 5 * 60_000, 500);
  await shot(d, 'dashboard-job-running');
  await shot(tabs[0].page, 'volunteer-training');
  assert.match(await tabs[0].page.textContent('#headline') ?? '', /Training|Averaging/);

  // One volunteer closes its tab mid-job.
  const before = (await session.server.api(`/api/jobs/${jobId}`)).body.job.seq;
  await tabs[2].page.close({ runBeforeUnload: true });
  await waitFor('the job finishes with the other two', async () => (await session.server.api(`/api/jobs/${jobId}`)).body.job.state === 'done', 12 * 60_000, 1000);
  const done = (await session.server.api(`/api/jobs/${jobId}`)).body.job;
  assert.ok(done.seq > before, 'syncs went on after the tab left');
  await waitFor('the dashboard shows done', async () => (await d.textContent('#job-summary'))?.includes('done'), 10_000, 200);
  await shot(d, 'dashboard-job-done');

  // What ended the job: an evaluation at the target on the word of several members, of the model the
  // job ends with (a last sync measured below the target sends training on: docs/protocol.md).
  assert.match(done.endReason ?? '', /reached target accuracy 0\.82/);
  const points = (await session.server.api(`/api/jobs/${jobId}/metrics`)).body.points as { step: number; accuracy: number | null; vouchers: number | null }[];
  const evaluations = points.filter((p) => p.accuracy !== null).map((p) => `${p.step}: ${p.accuracy} (${p.vouchers})`).join(', ');
  console.log(`# test accuracy by step (vouchers): ${evaluations}`);
  assert.ok(points.some((p) => p.accuracy !== null && p.accuracy >= 0.82 && (p.vouchers ?? 0) >= 2), 'an evaluation at the target, vouched for by several members');
  // The dashboard's last accuracy and the final checkpoint, evaluated independently on the CPU reference.
  const figure = (await d.textContent('[data-figure="test accuracy"]')) ?? '';
  const shown = Number(/([\d.]+)%/.exec(figure)![1]) / 100;
  assert.ok(shown >= 0.82, `the last evaluation (${shown}); by step: ${evaluations}\nserver:\n${session.server.logTail(40)}`);
  assert.match(figure, /\([2-9] members vouch\)/, 'figures are recorded on the word of several members');
  const [download] = await Promise.all([d.waitForEvent('download'), d.click('#download-checkpoint')]);
  // saveAs, not path(): the shared browser is a remote one.
  const saved = join(SHOTS, 'downloaded-checkpoint.safetensors');
  await download.saveAs(saved);
  const bytes = readFileSync(saved);
  const model = createModel(PRESETS['mlp-fashion'], new CpuBackend('f32'), 1);
  model.store.loadSafetensors(new Uint8Array(bytes));
  const { test } = await fashionMnistFromDisk();
  const cpu = await evaluate(model, sequentialBatches(test, 1000));
  console.log(`dashboard shows ${(100 * shown).toFixed(2)}%; the downloaded checkpoint on the CPU reference: ${(100 * cpu.accuracy).toFixed(2)}%`);
  assert.ok(Math.abs(cpu.accuracy - shown) <= 0.0006, `CPU ${cpu.accuracy} vs dashboard ${shown}`);
  const [csv] = await Promise.all([d.waitForEvent('download'), d.click('#download-csv')]);
  await csv.saveAs(join(SHOTS, 'downloaded-metrics.csv'));
  assert.match(readFileSync(join(SHOTS, 'downloaded-metrics.csv'), 'utf8'), /^seq,step,time,loss,accuracy/);
  for (const t of [dash, ...tabs.slice(0, 2)]) assert.deepEqual(t.errors, []);
});

test('a tab without WebGPU sees the explanation and the CPU fallback, not a crash', async () => {
  const context = await session.browser.newContext();
  // A string, not a function: tsx would wrap a function with helpers the page does not have.
  await context.addInitScript({ content: "Object.defineProperty(Navigator.prototype, 'gpu', { get: () => undefined });" });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${session.server.url}/apps/volunteer/`);
  await page.waitForSelector('#nogpu:not([hidden])');
  assert.match((await page.textContent('#nogpu-why')) ?? '', /does not offer WebGPU/);
  assert.equal(await page.isDisabled('#contribute'), true);
  await shot(page, 'volunteer-no-webgpu');
  await page.click('#use-cpu');
  await page.waitForSelector('#contribute:not([disabled])');
  assert.match((await page.textContent('[data-figure="GPU"]')) ?? '', /CPU fallback/);
  assert.deepEqual(errors, []);
  await context.close();
});
