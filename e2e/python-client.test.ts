// The Python example (examples/python/train_gpt.py, on requests and numpy) against a real server:
// two volunteers (the worker runtime on the CPU backend, in-memory links) train the GPT job it
// submits on the text it uploads; the script waits for the end, downloads the checkpoint, checks its
// digest and scores it with its own numpy forward pass on the job's validation windows, which must
// agree with the loss the volunteers reported for that sync. Its errors carry the server's code and
// message and a non-zero exit.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import { generateCorpus } from '@tabfleet/data';
import { decodeSafetensors } from '@tabfleet/protocol';
import { BASE_JOB, startTestServer, type TestServer } from '@tabfleet/server/testing';
import { nodeVolunteer } from '@tabfleet/worker/testing';

const script = resolve(import.meta.dirname, '../examples/python/train_gpt.py');
// Debian's interpreter, where the setup's python3-requests and python3-numpy are installed; another
// `python3` first on PATH (a pyenv, a venv) may lack them.
const python = process.env.TABFLEET_PYTHON ?? (existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3');

let server: TestServer;
let dir: string;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 20_000, barrierTimeoutMs: 60_000, loadTimeoutMs: 30_000 } });
  dir = mkdtempSync(join(tmpdir(), 'tabfleet-python-'));
  // 240 paragraphs of the generated corpus: about 30 KB, a few hundred windows of 32 bytes.
  writeFileSync(join(dir, 'corpus.txt'), Array.from({ length: 240 }, (_, i) => generateCorpus(3, i + 1).trim()).join('\n\n'));
});
after(async () => {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs the script to its end (asynchronously: the server and volunteers live on this event loop). */
function runPython(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((done, fail) => {
    const child = spawn(python, [script, ...args], { env: { ...process.env, PYTHONUNBUFFERED: '1', PYTHONDONTWRITEBYTECODE: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b));
    child.stderr.on('data', (b: Buffer) => (stderr += b));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
  });
}

test('train_gpt.py uploads a text, trains a GPT on it with volunteers, and its numpy loss on the checkpoint equals the server\'s',
  { timeout: 400_000 }, async () => {
  const net = new MemoryNetwork();
  const vols = [0, 1].map(() => nodeVolunteer(server.url, net));
  const out = join(dir, 'model.safetensors');
  try {
    const run = await runPython(['--server', server.url, '--token', 'test-token', join(dir, 'corpus.txt'), '--steps', '32', '--workers', '2',
      '--poll', '0.5', '--out', out, '--json']);
    assert.equal(run.code, 0, `exit ${run.code}\n${run.stderr}\n${server.logTail()}`);
    for (const v of vols) assert.equal(v.runtime.status.lastError, null, `${v.runtime.status.volunteerId}: ${v.runtime.status.lastError}`);
    const summary = JSON.parse(run.stdout.trim().split('\n').at(-1)!);
    const job = (await server.api(`/api/jobs/${summary.jobId}`)).body.job;
    assert.equal(job.state, 'done');
    assert.equal(job.spec.dataset, 'text-upload');
    assert.equal(job.spec.tokenizer, 'bytes');
    assert.match(run.stderr, new RegExp(`submitted job ${summary.jobId}`));
    assert.match(run.stderr, /validation loss \d/, 'progress shows the evaluations');
    console.log(run.stderr);

    // The file it saved is the server's checkpoint of the sync it names, by the server's digest and by ours.
    assert.equal(summary.checkpoint.sync, job.latestCheckpoint.seq);
    assert.equal(summary.checkpoint.sha256, job.latestCheckpoint.sha256);
    assert.equal(createHash('sha256').update(readFileSync(out)).digest('hex'), job.latestCheckpoint.sha256);

    // Its forward pass is its own (numpy, float64) and agrees with the volunteers' evaluation of that sync.
    const points = (await server.api(`/api/jobs/${job.id}/metrics`)).body.points as { seq: number; loss: number | null; accuracy: number | null }[];
    const evaluation = points.find((p) => p.seq === summary.checkpoint.sync && p.accuracy !== null)!;
    assert.ok(evaluation, `an evaluation of sync ${summary.checkpoint.sync}`);
    const { score } = summary;
    console.log(`numpy loss ${score.loss} (accuracy ${score.accuracy}) on ${score.windows} windows; server ${evaluation.loss} (${evaluation.accuracy})`);
    assert.equal(score.serverLoss, evaluation.loss);
    // The CPU backend rounds each op to float32 where numpy keeps float64: they agree to about 1e-7 here.
    assert.ok(Math.abs(score.loss - evaluation.loss!) < 1e-5, `numpy ${score.loss} against the server's ${evaluation.loss}`);
    assert.ok(Math.abs(score.accuracy - evaluation.accuracy!) < 0.01, `accuracy ${score.accuracy} against ${evaluation.accuracy}`);
    // Bytes start at ln 256 = 5.5 nats; 32 steps learn at least the corpus's common letters.
    assert.ok(score.loss < Math.log(256) - 1, `loss ${score.loss}`);
    assert.equal(typeof score.sample, 'string');

    // Without numpy it scores the same job by digest, and each tensor's shape and norm, in the standard library alone.
    const noNumpy = join(dir, 'no-numpy');
    mkdirSync(noNumpy, { recursive: true });
    writeFileSync(join(noNumpy, 'numpy.py'), 'raise ImportError("numpy is hidden from this run")\n');
    const plain = await runPython(['--server', server.url, '--token', 'test-token', '--job', job.id, '--out', join(dir, 'again.safetensors'), '--json'],
      { PYTHONPATH: noNumpy });
    assert.equal(plain.code, 0, plain.stderr);
    assert.match(plain.stderr, /numpy is not installed: no forward pass here/);
    const again = JSON.parse(plain.stdout.trim().split('\n').at(-1)!);
    assert.equal(again.checkpoint.sha256, job.latestCheckpoint.sha256);
    const { tensors } = decodeSafetensors(new Uint8Array(readFileSync(out)));
    assert.deepEqual(Object.keys(again.norms).sort(), Object.keys(tensors).sort());
    for (const [name, t] of Object.entries(tensors)) {
      const values = new Float32Array(t.data.slice().buffer);
      const norm = Math.sqrt(values.reduce((a, v) => a + v * v, 0));
      assert.deepEqual(again.norms[name].shape, t.shape, name);
      assert.ok(Math.abs(again.norms[name].norm - norm) <= 1e-9 * norm, `${name}: ${again.norms[name].norm} against ${norm}`);
    }
  } finally {
    for (const v of vols) v.runtime.stop();
  }
});

test('train_gpt.py prints the server\'s error code and message and exits non-zero', { timeout: 120_000 }, async () => {
  const corpus = join(dir, 'corpus.txt');
  const badToken = await runPython([corpus, '--json'], { TABFLEET_SERVER: server.url, TABFLEET_TOKEN: 'not-the-token-at-all' });
  assert.equal(badToken.code, 1, badToken.stderr);
  assert.match(badToken.stderr, /error: HTTP 401 unauthorized: /);
  assert.equal(JSON.parse(badToken.stdout).error.code, 'unauthorized');

  const before = (await server.api('/api/datasets')).body.datasets.length;
  const tiny = join(dir, 'tiny.txt');
  writeFileSync(tiny, 'too short\n\nfor a corpus\n');
  const small = await runPython(['--server', server.url, '--token', 'test-token', tiny]);
  assert.equal(small.code, 1, small.stderr);
  assert.match(small.stderr, /error: HTTP 400 bad_request: upload "tiny.txt": too little text: 24 bytes/);
  assert.equal((await server.api('/api/datasets')).body.datasets.length, before, 'nothing stored');

  const jobs = (await server.api('/api/jobs')).body.jobs.length;
  const shape = await runPython(['--server', server.url, '--token', 'test-token', corpus, '--width', '30', '--heads', '4']);
  assert.equal(shape.code, 1, shape.stderr);
  assert.match(shape.stderr, /error: HTTP 400 bad_request: .*width must be a multiple of heads/);
  assert.equal((await server.api('/api/jobs')).body.jobs.length, jobs, 'no job created');

  const unknown = await runPython(['--server', server.url, '--token', 'test-token', '--job', 'job-0000000000']);
  assert.equal(unknown.code, 1, unknown.stderr);
  assert.match(unknown.stderr, /error: HTTP 404 unknown_job: /);
  const mlp = await server.createJob({ ...BASE_JOB, maxWorkers: 2 });
  const notGpt = await runPython(['--server', server.url, '--token', 'test-token', '--job', mlp.id]);
  await server.api(`/api/jobs/${mlp.id}/stop`, { method: 'POST' });
  assert.equal(notGpt.code, 2, notGpt.stderr);
  assert.match(notGpt.stderr, /error: job .* is a mlp-fashion on fashion-mnist .*this script scores GPTs on uploaded text/);

  const missing = await runPython(['--server', server.url, corpus], { TABFLEET_TOKEN: '' });
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /give --server and --token/);
});
