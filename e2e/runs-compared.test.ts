// The researcher dashboard in headless Chromium, around two finished jobs: the new-job form leads with
// model, data, target and volunteers and folds the rest under "advanced", each field with the
// protocol's default for the choices made; the untouched form still posts the spec it always did.
// Two jobs trained by simulated volunteers (with different evaluations and batches) are ticked in the
// list and compared: a screenshot of each chart shows both jobs' colours, the table names both with
// the settings that differ, and switching the x axis redraws the curves. Screenshots go to
// e2e/screenshots/.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import { waitFor } from '@tabfleet/server/testing';
import { appsSession } from './apps-session';
import { countColor, decodePng } from './png-pixels';

const session = appsSession();
const { open, shot } = session;

const text = (page: Page, selector: string) => page.textContent(selector).then((t) => t ?? '');

/** Trains a job to its end with two simulated volunteers that report `accuracy` for each sync's model. */
async function trainedJob(name: string, spec: { H: number; lr: number; batchSize: number }, accuracy: (seq: number) => number): Promise<string> {
  const s = session.server;
  const job = await s.createJob({
    name, H: spec.H, pacing: 'fixed', trust: 'trusted', hyperparameters: { lr: spec.lr, batchSize: spec.batchSize },
    minWorkers: 2, maxWorkers: 2, targetSteps: 48, checkpointEvery: 1, evalEverySteps: spec.H, // every sync evaluated: a curve
  });
  const sims = await Promise.all([0, 1].map(() => s.volunteer({ trainMs: 10, evaluate: (seq) => ({ accuracy: accuracy(seq), loss: 1 / (1 + seq) }) })));
  for (const v of sims) await v.request(job.id);
  await waitFor(`${name} ends`, async () => (await s.api(`/api/jobs/${job.id}`)).body.job.state === 'done', 60_000, 100);
  for (const v of sims) v.close();
  return job.id;
}

test('the form folds its advanced fields with their defaults; two runs compared show both curves by step, samples and wall time', { timeout: 5 * 60_000 }, async () => {
  const [a, b] = [
    await trainedJob('compare A', { H: 2, lr: 0.1, batchSize: 32 }, (seq) => Math.min(0.95, 0.5 + seq / 60)),
    await trainedJob('compare B', { H: 4, lr: 0.05, batchSize: 8 }, (seq) => 0.2 + seq / 40),
  ];
  const dash = await open(`${session.server.url}/apps/dashboard/#token=test-token`);
  const d = dash.page;
  await d.setViewportSize({ width: 1100, height: 900 });
  await d.waitForSelector('#jobs-view:not([hidden])');

  // The form: leading fields in view, the advanced ones folded, each with its default.
  assert.equal(await d.getAttribute('#advanced', 'open'), null, 'advanced is folded by default');
  for (const name of ['preset', 'dataset', 'targetSteps', 'trust', 'minWorkers']) assert.ok(await d.isVisible(`[name=${name}]`), `${name} leads the form`);
  for (const name of ['strategy', 'lr', 'sparsity', 'aggregation']) assert.equal(await d.isVisible(`[name=${name}]`), false, `${name} is folded`);
  await shot(d, 'dashboard-form-folded');
  await d.click('#advanced summary');
  await d.waitForSelector('[name=sparsity]', { state: 'visible' });
  const shown = (name: string) => d.getAttribute(`[data-default-for=${name}]`, 'data-value');
  assert.equal(await text(d, '[data-default-for=sparsity]'), 'Default: 0.95.');
  assert.equal(await shown('aggregation'), 'centered-clip');
  assert.equal(await shown('optimizer'), 'sgd');
  assert.equal(await shown('H'), '8');
  assert.equal(await shown('momentum'), '0.9');
  await d.selectOption('select[name=strategy]', 'diloco');
  await d.selectOption('select[name=trust]', 'trusted');
  await waitFor('defaults follow the choices', async () => (await shown('optimizer')) === 'adamw', 5_000, 50);
  assert.equal(await shown('outerLr'), '0.7');
  assert.equal(await shown('aggregation'), 'mean');
  assert.equal(await text(d, 'select[name=optimizer] option[value=""]'), 'default (adamw)');
  await d.selectOption('select[name=strategy]', 'ddp');
  await waitFor('ddp sends sparser gradients', async () => (await shown('sparsity')) === '0.999', 5_000, 50);
  await shot(d, 'dashboard-form-advanced');

  // The untouched form posts what it always did.
  await d.reload();
  await d.waitForSelector('#jobs-view:not([hidden])');
  const [request] = await Promise.all([d.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith('/api/jobs')), d.click('#job-form button[type=submit]')]);
  assert.deepEqual(request.postDataJSON(), {
    preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', compression: 'none', trust: 'untrusted',
    hyperparameters: { lr: 0.05, batchSize: 32 }, H: 8, minWorkers: 1, maxWorkers: 4, targetSteps: 800,
  });
  await d.waitForSelector('#job-view:not([hidden])');
  // Nobody trains it: stopped, it stays in the list without holding volunteers.
  await session.server.api(`/api/jobs/${/#\/jobs\/([\w-]+)/.exec(d.url())![1]}/stop`, { method: 'POST' });
  await d.goto(`${session.server.url}/apps/dashboard/#/`);
  await d.waitForSelector(`#jobs tr[data-job="${b}"]`);

  // Pick the two finished jobs and compare them.
  assert.equal(await d.isDisabled('#compare-picked'), true, 'comparing needs two jobs');
  await d.check(`#jobs input[data-compare="${a}"]`);
  await d.check(`#jobs input[data-compare="${b}"]`);
  await d.click('#compare-picked');
  await d.waitForSelector('#compare-view:not([hidden])');
  await waitFor('both jobs charted', async () => (await d.getAttribute('#compare-acc', 'data-series')) === '2' && (await d.getAttribute('#compare-loss', 'data-series')) === '2', 10_000, 50);
  const rows = await d.$$eval('#compare-table tbody tr',
    (trs) => trs.map((tr) => ({ job: tr.getAttribute('data-job'), color: tr.getAttribute('data-color')!, label: tr.querySelector('[data-label]')?.textContent })));
  assert.deepEqual(rows.map((r) => [r.job, r.label]), [[a, 'compare A'], [b, 'compare B']]);
  assert.notEqual(rows[0].color, rows[1].color);
  const head = await d.$$eval('#compare-table thead th', (ths) => ths.map((th) => th.textContent));
  for (const field of ['H', 'hyperparameters.lr', 'hyperparameters.batchSize']) assert.ok(head.includes(field), `${field} differs: ${head}`);
  assert.ok(!head.includes('preset') && !head.includes('name'), `shared settings, and the names the job column shows, are left out: ${head}`);
  await shot(d, 'dashboard-compare-step');

  /** Pixels of each job's colour in a screenshot of the chart. */
  const colours = async (selector: string) => {
    const png = await d.locator(selector).screenshot();
    const px = decodePng(png);
    return { png, counts: rows.map((r) => countColor(px, r.color)) };
  };
  // Accuracy by step: the two jobs' evaluations differ, so both lines show.
  const accuracy = await colours('#compare-acc');
  for (const [i, n] of accuracy.counts.entries()) assert.ok(n > 150, `${rows[i].label}'s colour on the accuracy chart: ${accuracy.counts}`);

  // Loss by samples seen: B's batches are a quarter of A's, so its curve falls four times sooner.
  const lossByStep = await colours('#compare-loss');
  const pathsByStep = await d.$$eval('#compare-loss path', (ps) => ps.map((p) => p.getAttribute('d')));
  await d.check('#compare-axis input[value=samples]');
  await waitFor('the loss chart is redrawn by samples', async () => /samples seen/.test(await text(d, '#compare-loss')), 5_000, 50);
  const lossBySamples = await colours('#compare-loss');
  for (const [i, n] of lossBySamples.counts.entries()) assert.ok(n > 150, `${rows[i].label}'s colour on the loss chart by samples: ${lossBySamples.counts}`);
  assert.ok(!lossBySamples.png.equals(lossByStep.png), 'the plot changed with the axis');
  assert.notDeepEqual(await d.$$eval('#compare-loss path', (ps) => ps.map((p) => p.getAttribute('d'))), pathsByStep);
  await shot(d, 'dashboard-compare-samples');

  await d.check('#compare-axis input[value=time]');
  await waitFor('the charts are redrawn by wall time', async () => /wall time since the first sync/.test(await text(d, '#compare-acc')), 5_000, 50);
  const byTime = await colours('#compare-acc');
  for (const [i, n] of byTime.counts.entries()) assert.ok(n > 50, `${rows[i].label}'s colour on the accuracy chart by wall time: ${byTime.counts}`);
  assert.deepEqual(dash.errors, []);
});
