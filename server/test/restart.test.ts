// Kill the server process mid-job and start it again on the same SQLite file: the job and its
// metrics are intact, the volunteers reconnect on their own, load the last checkpoint and training
// carries on from it.
//
// A real process on real time: its waits are bounds on a hang, not on speed. Each is 90 s, three
// times what a quiet run needs at most; 30 s failed once beside the network lab's Chromium tests (the
// file got 9 CPU s in 35 s).
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, test } from 'node:test';
import { modelDigest } from '@tabfleet/protocol';
import { freePort } from '../src/testing/redis-server';
import { RingOracle, SimVolunteer, waitFor } from '../src/testing/sim-volunteer';
import { BASE_JOB } from '../src/testing/test-server';

/** How long a step may take before the test calls it hung. */
const HANG_MS = 90_000;
const root = resolve(import.meta.dirname, '../..');
const dataDir = mkdtempSync(join(tmpdir(), 'tabfleet-restart-'));
const sims: SimVolunteer[] = [];
let child: ChildProcess | null = null;
after(() => {
  for (const s of sims) s.close();
  child?.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

async function startChild(port: number): Promise<ChildProcess> {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'server/src/main.ts', '--port', String(port), '--data', dataDir, '--address-job-share', '1', '--network-prefix', 'off'], {
    cwd: root, env: { ...process.env, TABFLEET_TOKEN: 'restart-token-long-enough' }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((resolveReady, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), HANG_MS);
    const onData = (d: Buffer) => {
      output += d;
      if (output.includes('[server] ready')) {
        clearTimeout(timer);
        resolveReady();
      }
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', onData);
    proc.once('exit', (code) => reject(new Error(`server exited with ${code}:\n${output}`)));
  });
  return proc;
}

test('a job survives a server crash and continues from its last checkpoint', { timeout: 6 * HANG_MS }, async () => {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const api = async (path: string, init: RequestInit = {}) => {
    const res = await fetch(`${url}${path}`, { ...init, headers: { authorization: 'Bearer restart-token-long-enough', 'content-type': 'application/json' } });
    return res.json();
  };
  child = await startChild(port);
  const { job } = await api('/api/jobs', { method: 'POST', body: JSON.stringify({ ...BASE_JOB, H: 1, minWorkers: 2, maxWorkers: 2, checkpointEvery: 3 }) });
  const oracle = new RingOracle();
  for (let i = 0; i < 2; i++) {
    const s = new SimVolunteer({ url, oracle, reconnect: true, trainMs: 30 });
    sims.push(s);
    await s.connected();
    await s.request(job.id);
  }
  await waitFor('a checkpoint and rounds after it', async () => {
    const j = (await api(`/api/jobs/${job.id}`)).job;
    return j.latestCheckpoint?.seq >= 3 && j.seq >= j.latestCheckpoint.seq + 1 ? j : null;
  }, HANG_MS);
  // Kill it hard, between two checkpoints.
  const beforeCrash = (await api(`/api/jobs/${job.id}`)).job;
  const metricsBefore = (await api(`/api/jobs/${job.id}/metrics`)).points;
  const roundsBefore = (await api(`/api/jobs/${job.id}/rounds`)).rounds;
  child.kill('SIGKILL');
  await new Promise((r) => child!.once('exit', r));
  const checkpoint = beforeCrash.latestCheckpoint.seq;
  const appliedAtCheckpoint = modelDigest(sims[0].applied.get(checkpoint)!);

  child = await startChild(port);
  const resumed = (await api(`/api/jobs/${job.id}`)).job;
  assert.equal(resumed.name, beforeCrash.name);
  assert.deepEqual(resumed.spec, beforeCrash.spec);
  assert.equal(resumed.seq, checkpoint, 'the job resumes from its checkpoint');
  assert.equal(resumed.latestCheckpoint.sha256, beforeCrash.latestCheckpoint.sha256);
  const metricsAfter = (await api(`/api/jobs/${job.id}/metrics`)).points;
  assert.deepEqual(metricsAfter.slice(0, metricsBefore.length), metricsBefore, 'metrics intact');

  // The volunteers reconnect by themselves, load that checkpoint and train on.
  await waitFor('both reloaded the checkpoint', () => sims.every((s) => s.loadedFrom.some((l) => l.seq === checkpoint)), HANG_MS);
  for (const s of sims) assert.equal(s.loadedFrom.find((l) => l.seq === checkpoint)!.digest, appliedAtCheckpoint);
  await waitFor('training continues past the crash', async () => (await api(`/api/jobs/${job.id}`)).job.seq >= beforeCrash.seq + 2, HANG_MS);
  const rounds = (await api(`/api/jobs/${job.id}/rounds`)).rounds as { roundId: number; seq: number; outcome: string; detail: string }[];
  const lastOld = Math.max(...roundsBefore.map((r: { roundId: number }) => r.roundId));
  const newRounds = rounds.filter((r) => r.roundId > lastOld);
  assert.ok(newRounds.length > 0);
  assert.equal(Math.min(...newRounds.map((r) => r.seq)), checkpoint + 1, 'the first new round produces the sync after the checkpoint');
  const interrupted = rounds.filter((r) => r.roundId <= lastOld && r.outcome !== 'committed' && r.outcome !== 'aborted');
  assert.deepEqual(interrupted, [], 'no round is left running');
});
