// The researcher's whole path against a real server: submit a job, watch it while simulated volunteers
// train it to its target (watch prints loss and accuracy lines and exits 0 when the job is done), then
// download its checkpoints: the latest and an earlier sync, each file's SHA-256 equal to the server's
// record and to the bytes the volunteer uploaded for that sync.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { verifyCheckpoint, type JobSummary } from '@tabfleet/protocol';
import { BASE_JOB, checkpointOf, startTestServer, type SimVolunteer, type TestServer } from '@tabfleet/server/testing';
import { cliHome, jsonOf, runCli, shown } from '../../test/cli-process';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

test('submit → watch until the job is done (exit 0) → download checkpoints whose digest is the server\'s', async () => {
  const home = cliHome();
  const env = { ...home.env, TABFLEET_SERVER: server.url, TABFLEET_TOKEN: 'test-token' };
  const file = join(home.dir, 'job.json');
  // Syncs of H = 2 up to 12 steps; every second one checkpointed (and evaluated), the last one too.
  writeFileSync(file, JSON.stringify({ ...BASE_JOB, name: 'to the target', H: 2, minWorkers: 2, maxWorkers: 2, targetSteps: 12, checkpointEvery: 2 }));
  const submitted = await runCli(['submit', file, '--json'], { env });
  assert.equal(submitted.code, 0, shown(submitted));
  const id: string = jsonOf(submitted).job.id;

  const watching = runCli(['watch', id, '--interval', '0.2'], { env });
  // What each volunteer uploads as a sync's checkpoint, by sync: the bytes a download must hash to.
  const uploaded = new Map<number, string>();
  const sims: SimVolunteer[] = [];
  for (let i = 0; i < 2; i++) {
    const checkpoint = (seq: number, params: Float32Array) => {
      const bytes = checkpointOf(sims[i].assignment!.job.spec, params);
      uploaded.set(seq, sha256(bytes));
      return bytes;
    };
    sims.push(await server.volunteer({ trainMs: 20, checkpoint }));
    await sims[i].request(id);
  }

  const watched = await watching;
  assert.equal(watched.code, 0, `the job reached its target: ${shown(watched)}`);
  const job: JobSummary = (await server.api(`/api/jobs/${id}`)).body.job;
  assert.equal(job.state, 'done');
  const last = job.latestCheckpoint!.seq;
  assert.equal(last, job.seq, 'the last sync was checkpointed');
  const lines = watched.stdout.trim().split('\n');
  assert.match(lines.at(-1)!, new RegExp(`^${id} done.* at step 12/12; checkpoint of sync ${last}: tabfleet download ${id}$`));
  assert.ok(lines.some((l) => /^sync +\d+ +step \d+\/12 +loss \d+\.\d{4} +2 volunteers/.test(l)), shown(watched));
  assert.ok(lines.some((l) => new RegExp(`^eval +${last} +step 12/12 +loss \\d+\\.\\d{4} +accuracy \\d+\\.\\d%`).test(l)), `the final evaluation: ${shown(watched)}`);
  assert.equal(watched.stderr, '', 'no bar when stderr is not a terminal');

  const latest = await runCli(['download', id], { env, cwd: home.dir });
  assert.equal(latest.code, 0, shown(latest));
  const path = join(home.dir, `${id}-sync${last}.safetensors`);
  assert.match(latest.stdout, /sha256 [0-9a-f]{64} \(equals the server's\)/);
  const bytes = readFileSync(path);
  assert.equal(sha256(bytes), job.latestCheckpoint!.sha256, 'the server\'s recorded digest');
  assert.equal(sha256(bytes), uploaded.get(last), 'the bytes the volunteer uploaded');
  verifyCheckpoint(job.spec, new Uint8Array(bytes));

  const earlierSeq = Math.min(...uploaded.keys());
  assert.ok(earlierSeq < last, `an earlier checkpoint: ${[...uploaded.keys()]}`);
  const earlier = await runCli(['download', id, '--sync', String(earlierSeq), '-o', join(home.dir, 'early.safetensors'), '--json'], { env });
  assert.equal(earlier.code, 0, shown(earlier));
  const doc = jsonOf(earlier);
  assert.deepEqual({ ...doc, bytes: 0 }, { jobId: id, seq: earlierSeq, file: join(home.dir, 'early.safetensors'), bytes: 0, sha256: uploaded.get(earlierSeq), verified: true });
  assert.equal(sha256(readFileSync(join(home.dir, 'early.safetensors'))), uploaded.get(earlierSeq));

  const never = [...Array(last).keys()].find((seq) => seq > 0 && !uploaded.has(seq))!;
  const gone = await runCli(['download', id, '--sync', String(never), '--json'], { env, cwd: home.dir });
  assert.equal(gone.code, 4, `sync ${never} was never checkpointed: ${shown(gone)}`);
  assert.equal(jsonOf(gone).error.kind, 'not_found');
});
