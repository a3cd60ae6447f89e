// A stopped job stays stopped while its end is still being written: the ownership sweep waits for the
// coordinator's store writes before it drops it and its lease, so no sweep can read the job as running
// and load it again, and a second stop is a conflict. (Seen under load: a second stop answered 200,
// the job loaded again from the store's older row.) Fake time, a real SQLite store whose job updates
// are held back until the test lets them through.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ProtocolError } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import type { CoordinatorDeps } from '../coordinator/types';
import { SqliteStore } from '../store/sqlite';
import type { JobRecord, Store } from '../store/store';
import { LocalCluster } from './cluster';
import { JobHub, OWNERSHIP_SWEEP_MS } from './hub';

test('a stop whose write is slow is not undone by the ownership sweep, and a second stop is a conflict', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tabfleet-hub-stop-'));
  const sqlite = new SqliteStore(dir);
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let holding = false;
  // The store as the hub sees it: a job's update waits while `holding`.
  const store = new Proxy(sqlite, {
    get(target, key, receiver) {
      if (key === 'updateJob') return async (job: JobRecord) => {
        if (holding) await held;
        return target.updateJob(job);
      };
      const value = Reflect.get(target, key, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as Store;
  const clock = new FakeClock();
  const deps: CoordinatorDeps = {
    store, clock, timing: { roundTimeoutMs: 10_000, barrierTimeoutMs: 10_000, loadTimeoutMs: 10_000 },
    toVolunteer: () => {}, toDashboards: () => {}, watched: () => false, checkpointUrl: (job, seq) => `http://x/${job}/${seq}`, count: () => {}, log: () => {},
  } as CoordinatorDeps;
  const hub = new JobHub(deps, new LocalCluster('n1'));
  await hub.start();
  try {
    const job = await hub.createJob({ preset: 'mlp-fashion', trust: 'trusted', minWorkers: 2 });
    holding = true;
    assert.equal((await hub.stopJob(job.id)).state, 'stopped');
    // The periodic sweep runs while the stop's write is held.
    await clock.advance(OWNERSHIP_SWEEP_MS);
    const again = hub.stopJob(job.id).then(() => 'stopped again', (e) => e);
    await clock.advance(OWNERSHIP_SWEEP_MS);
    holding = false;
    release();
    const second = await again;
    assert.ok(second instanceof ProtocolError && second.code === 'conflict', `the second stop: ${second}`);
    await clock.advance(OWNERSHIP_SWEEP_MS);
    assert.equal((await sqlite.getJob(job.id))!.state, 'stopped');
    assert.equal((await hub.summary(job.id)).state, 'stopped');
    assert.deepEqual(hub.running().map((c) => c.summary().id), [], 'no coordinator runs the stopped job');
    await assert.rejects(hub.stopJob(job.id), (e) => e instanceof ProtocolError && e.code === 'conflict');
  } finally {
    await hub.close();
    await sqlite.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
