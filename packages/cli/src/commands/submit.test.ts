// `tabfleet submit` against a real server: a job file that fails the schema is refused here with the
// path of each problem and exit 2, and no job is created; a good one is created and its id printed,
// `ls` lists it, `watch` follows it, `stop` stops it (watch then exits 1), and stopping it again is a
// refusal (exit 1) while an unknown id is exit 4.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { BASE_JOB, waitFor, type TestServer } from '@tabfleet/server/testing';
import { cliAgainstTestServer, jsonLines, jsonOf, runCli, shown } from '../../test/cli-process';

let server: TestServer;
let env: Record<string, string>;
let dir: string;
cliAgainstTestServer((ctx) => ({ server, env, dir } = ctx));

const jobCount = async () => ((await server.api('/api/jobs')).body.jobs as unknown[]).length;

function jobFile(name: string, spec: unknown): string {
  const file = join(dir, name);
  writeFileSync(file, typeof spec === 'string' ? spec : JSON.stringify(spec, null, 2));
  return file;
}

test('a job file that fails the schema is refused with each problem\'s path and exit 2; no job is created', async () => {
  const before = await jobCount();
  const file = jobFile('bad.json', { ...BASE_JOB, strategy: 'gossip', hyperparameters: { lr: 0.1, batchSize: 'big' } });
  const run = await runCli(['submit', file], { env });
  assert.equal(run.code, 2, shown(run));
  assert.equal(run.stdout, '', 'nothing on stdout but a result');
  assert.match(run.stderr, /bad\.json: not a valid job spec \(2 problems\)/);
  assert.match(run.stderr, /^ {2}strategy: /m);
  assert.match(run.stderr, /^ {2}hyperparameters\.batchSize: /m);

  const json = await runCli(['submit', file, '--json'], { env });
  assert.equal(json.code, 2);
  const { error } = jsonOf(json);
  assert.equal(error.kind, 'usage');
  assert.deepEqual(error.details.map((d: string) => d.split(':')[0]).sort(), ['hyperparameters.batchSize', 'strategy']);

  const notJson = await runCli(['submit', jobFile('broken.json', '{ "preset": ')], { env });
  assert.equal(notJson.code, 2, shown(notJson));
  assert.match(notJson.stderr, /broken\.json is not valid JSON/);
  // Valid by the schema, refused by the server (no such upload): its 400 is bad input too.
  const refused = await runCli(['submit', jobFile('no-upload.json', { ...BASE_JOB, dataset: 'image-upload', upload: 'u-000000000000' }), '--json'], { env });
  assert.equal(refused.code, 2, shown(refused));
  assert.equal(jsonOf(refused).error.code, 'bad_request');
  assert.match(jsonOf(refused).error.message, /^submit: 400 .*u-000000000000/);
  const missing = await runCli(['submit', join(dir, 'no-such.json')], { env });
  assert.equal(missing.code, 2, shown(missing));
  assert.equal(await jobCount(), before, 'no job was created');
});

test('submit prints the id; ls lists the job; stop stops it, and watch then exits 1', async () => {
  const file = jobFile('job.json', { ...BASE_JOB, name: 'cli submitted job', minWorkers: 2, maxWorkers: 2, targetSteps: 500 });
  const run = await runCli(['submit', file], { env });
  assert.equal(run.code, 0, shown(run));
  const id = run.stdout.trim();
  assert.match(id, /^[\w-]+$/, 'only the id on stdout');
  assert.match(run.stderr, new RegExp(`tabfleet watch ${id}`));
  const detail = (await server.api(`/api/jobs/${id}`)).body.job;
  assert.equal(detail.name, 'cli submitted job');
  assert.equal(detail.spec.targetSteps, 500);

  const ls = await runCli(['ls', '--json'], { env });
  assert.equal(ls.code, 0, shown(ls));
  assert.equal(jsonOf(ls).jobs.find((j: { id: string }) => j.id === id)?.state, 'waiting');
  const table = await runCli(['ls'], { env });
  const row = table.stdout.split('\n').find((l) => l.startsWith(id));
  assert.ok(row, shown(table));
  assert.match(row, /cli submitted job\s+waiting\s+0\/500\s+0\s+-/);

  // Two volunteers start it; watch follows until the stop below ends it.
  const watching = runCli(['watch', id, '--json', '--interval', '0.2'], { env });
  for (let i = 0; i < 2; i++) await (await server.volunteer({ trainMs: 20 })).request(id);
  await waitFor('the job trains', async () => (await server.api(`/api/jobs/${id}`)).body.job.seq >= 2, 30_000, 50);
  const stop = await runCli(['stop', id, '--json'], { env });
  assert.equal(stop.code, 0, shown(stop));
  assert.equal(jsonOf(stop).job.state, 'stopped');

  const watched = await watching;
  assert.equal(watched.code, 1, `a stopped job: ${shown(watched)}`);
  const lines = jsonLines(watched);
  assert.deepEqual(lines.at(-1), { ...lines.at(-1), event: 'end', state: 'stopped', exit: 1 });
  assert.ok(lines.some((l) => l.event === 'status' && l.state === 'running'), 'it saw the job run');
  assert.ok(lines.some((l) => l.event === 'metric' && l.kind === 'sync' && typeof l.loss === 'number'), 'and its syncs');

  const again = await runCli(['stop', id], { env });
  assert.equal(again.code, 1, `a job that has ended: ${shown(again)}`);
  assert.match(again.stderr, /409/);
  const unknown = await runCli(['stop', 'job-nope', '--json'], { env });
  assert.equal(unknown.code, 4, shown(unknown));
  assert.equal(jsonOf(unknown).error.kind, 'not_found');
  const badId = await runCli(['stop', 'bad id!'], { env });
  assert.equal(badId.code, 2, shown(badId));
});
