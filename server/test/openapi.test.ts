// The OpenAPI document the live server serves: public, valid OpenAPI 3.1 by a real validator, and
// complete against the router (a route of ROUTES missing from it fails, and so does a path it names
// that ROUTES lacks); what the server answers fits the schemas the document was generated from.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import { z } from 'zod';
import { errorBody, healthBody, jobSummaryBody, publicInfoBody, volunteerCreditBody, workerRowBody } from '../src/http/api-bodies';
import { ROUTE_DOCS } from '../src/http/api-description';
import { openApiDocument, routeCoverage } from '../src/http/openapi';
import { ROUTES } from '../src/http/routes';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
let document: Record<string, any>;
before(async () => {
  server = await startTestServer();
  // Public: no token.
  const res = await fetch(`${server.url}/api/openapi.json`);
  assert.equal(res.status, 200);
  document = await res.json();
});
after(() => server.stop());

const router = ROUTES.map(([method, pattern]) => ({ method, pattern }));

test('the served document is valid OpenAPI 3.1', async () => {
  assert.equal(document.openapi, '3.1.0');
  await SwaggerParser.validate(structuredClone(document) as never);
  // The validator refuses what is not: a parameter in a place 3.1 has none, a reference to no schema.
  const badParameter = structuredClone(document);
  badParameter.paths['/api/jobs/{id}'].get.parameters[0].in = 'body';
  await assert.rejects(SwaggerParser.validate(badParameter as never));
  const dangling = structuredClone(document);
  delete dangling.components.schemas.JobSummary;
  await assert.rejects(SwaggerParser.validate(dangling as never), /JobSummary/);
});

test('every route of the router is in the document, and the document names no route the router lacks', () => {
  assert.deepEqual(routeCoverage(router, document), { undocumented: [], unrouted: [] });
  assert.equal(Object.values(document.paths).flatMap((item) => Object.keys(item as object)).length, ROUTE_DOCS.length, 'one operation per description');
});

test('the coverage check fails when either side is missing a route', () => {
  // A router with one route more than the document describes (here: the document without one).
  const withoutStop = openApiDocument(ROUTE_DOCS.filter((d) => d.path !== '/api/jobs/{id}/stop'));
  assert.deepEqual(routeCoverage(router, withoutStop), { undocumented: ['POST ^\\/api\\/jobs\\/([^/]+)\\/stop$'], unrouted: [] });
  // A made-up route the router lacks, and a known path under the wrong method.
  const madeUp = openApiDocument([
    ...ROUTE_DOCS,
    { method: 'GET', path: '/api/jobs/{id}/logs', auth: 'researcher', summary: 'made up', params: { id: { description: 'x', schema: z.string(), example: 'job-1' } },
      ok: { status: 200, description: 'x', content: { 'text/plain': 'text' } }, errors: [] },
    { method: 'POST', path: '/healthz', auth: 'public', summary: 'made up', ok: { status: 200, description: 'x', content: { 'text/plain': 'text' } }, errors: [] },
  ]);
  const coverage = routeCoverage(router, madeUp);
  assert.deepEqual({ ...coverage, unrouted: coverage.unrouted.sort() }, { undocumented: [], unrouted: ['GET /api/jobs/{id}/logs', 'POST /healthz'] });
  // A router whose table lost a route the document still names.
  const fewer = router.filter((r) => r.pattern.source !== '^\\/api\\/datasets$' || r.method !== 'GET');
  assert.deepEqual(routeCoverage(fewer, document).unrouted, ['GET /api/datasets']);
});

test('what the server answers fits the documented schemas', async () => {
  healthBody.parse((await server.api('/healthz')).body);
  const created = await server.api('/api/jobs', { method: 'POST', json: { preset: 'cnn-fashion', name: 'schema check' } });
  assert.equal(created.status, 201, created.text);
  const job = jobSummaryBody.parse(created.body.job);
  jobSummaryBody.array().parse((await server.api('/api/jobs')).body.jobs);
  const detail = (await server.api(`/api/jobs/${job.id}`)).body;
  jobSummaryBody.parse(detail.job);
  workerRowBody.array().parse(detail.workers);
  publicInfoBody.parse(await (await fetch(`${server.url}/api/public/info`)).json());
  const credit = await fetch(`${server.url}/api/public/credit`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ clientId: 'a'.repeat(20) }) });
  z.strictObject({ credit: volunteerCreditBody.nullable() }).parse(await credit.json());
  const refused = await fetch(`${server.url}/api/jobs`, { headers: { authorization: 'Bearer nope' } });
  assert.equal(refused.status, 401);
  errorBody.parse(await refused.json());
  // A documented status per refusal: the 401 above is in the document.
  assert.ok(document.paths['/api/jobs'].get.responses['401']);
  await server.api(`/api/jobs/${job.id}/stop`, { method: 'POST' });
});
