// The dashboard's HTTP API reference in headless Chromium: reached from the dashboard, it lists every
// operation of the server's OpenAPI document with its method, path, who may call it and its summary;
// a route opens onto its request body and answers, and a named schema's link opens that schema.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { appsSession } from './apps-session';

const session = appsSession();

interface Listed { method: string; path: string; auth: string; summary: string }

test('the API reference lists every route of /api/openapi.json, each opening onto its bodies and answers', { timeout: 10 * 60_000 }, async () => {
  const doc = await (await fetch(`${session.server.url}/api/openapi.json`)).json() as { paths: Record<string, Record<string, { summary: string }>> };
  const expected = Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => `${method.toUpperCase()} ${path}: ${op.summary}`));
  assert.ok(expected.length >= 20, `the document names ${expected.length} operations`);

  const opened = await session.open(`${session.server.url}/apps/dashboard/`);
  const page = opened.page;
  await page.click('#api-reference');
  await page.waitForSelector('#routes[aria-busy=false]');
  assert.match(page.url(), /\/apps\/dashboard\/api\.html$/);
  const listed = await page.$$eval('#routes details.route', (rows) => rows.map((r) => ({
    method: (r as HTMLElement).dataset.method!, path: (r as HTMLElement).dataset.path!, auth: (r as HTMLElement).dataset.auth!,
    summary: r.querySelector('summary')!.textContent!.replace(/\s+/g, ' ').trim(),
  }))) as Listed[];
  assert.deepEqual(listed.map((r) => `${r.method} ${r.path}: ${doc.paths[r.path][r.method.toLowerCase()].summary}`).sort(), expected.sort());
  // Each row shows its method, path and summary as text, and who may call it.
  for (const r of listed) assert.ok(r.summary.startsWith(`${r.method} ${r.path}`) && r.summary.endsWith(doc.paths[r.path][r.method.toLowerCase()].summary), r.summary);
  const auth = (method: string, path: string) => listed.find((r) => r.method === method && r.path === path)?.auth;
  assert.equal(auth('POST', '/api/jobs'), 'researcher');
  assert.equal(auth('GET', '/api/public/info'), 'public');
  assert.equal(auth('GET', '/api/jobs/{id}/checkpoints/{seq}'), 'ticket');
  assert.match(await page.textContent('details.route[data-method=POST][data-path="/api/jobs"] .auth') ?? '', /researcher token/);

  // Collapsed until opened: then the job spec's fields, and the answers with their codes.
  const create = page.locator('details.route[data-method=POST][data-path="/api/jobs"]');
  const body = create.locator('details.media').first();
  assert.equal(await body.isVisible(), false);
  await create.locator('summary').first().click();
  await body.locator('summary').click();
  const fields = await body.locator('[data-field]').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.field));
  for (const f of ['preset', 'dataset', 'strategy', 'hyperparameters', 'lr', 'batchSize', 'targetSteps']) assert.ok(fields.includes(f), `request body shows ${f}`);
  assert.match(await body.locator('[data-field=preset]').textContent() ?? '', /required/);
  assert.doesNotMatch(await body.locator('[data-field=dataset]').first().textContent() ?? '', /required/);
  const statuses = await create.locator('ul.responses > li').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.status));
  assert.deepEqual(statuses.slice(0, 3), ['201', '400', '401']);
  await create.locator('li[data-status="201"] details.media summary').click();
  assert.equal(await create.locator('li[data-status="201"] [data-field=job]').isVisible(), true);

  // A named schema's link opens it among the schemas.
  await create.locator('li[data-status="201"] [data-field=job] a[href="#schema-JobSummary"]').click();
  await page.waitForSelector('#schema-JobSummary[open]');
  assert.equal(await page.locator('#schema-JobSummary [data-field=latestCheckpoint]').first().isVisible(), true);
  await session.shot(page, 'api-reference');
  assert.deepEqual(opened.errors, []);
});
