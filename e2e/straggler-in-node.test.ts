// No waiting on stragglers, against the real server: four volunteers (the worker runtime on the CPU
// backend, in-memory links) train; one stops answering for 30 s (its local work stalls). The other
// three commit syncs throughout, no sync waiting longer than the pace-derived bound; the silent one is
// left out of those syncs, not evicted, and when it answers again its stale work is dropped, it
// reloads the job's model and contributes again.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { MemoryNetwork } from '@tabfleet/collective';
import { startTestServer, waitFor, type TestServer } from '@tabfleet/server/testing';
import { nodeVolunteer } from '@tabfleet/worker/testing';

const SILENCE_MS = 30_000;

let server: TestServer;
const logs: string[] = [];
before(async () => {
  server = await startTestServer({ log: (l) => logs.push(l), timing: { roundTimeoutMs: 20_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 60_000 } });
});
after(() => server.stop());

test('one member of four silent for 30 s: the others commit throughout, it is left out, not evicted, and contributes after', { timeout: 300_000 }, async () => {
  const job = await server.createJob({
    // Fixed H = 4: the counts and the bound below are for its syncs (auto, the default, lengthens
    // them as it raises H, and the pace-derived bound with them).
    trust: 'trusted', strategy: 'localsgd', H: 4, pacing: 'fixed', hyperparameters: { lr: 0.05, batchSize: 32 },
    // No checkpoint or evaluation falls in the silence (the returning member's reload asks for one).
    minWorkers: 3, maxWorkers: 4, targetSteps: 1_000_000, evalEverySteps: 1_000_000, checkpointEvery: 1_000,
  });
  const net = new MemoryNetwork();
  const vols = [0, 1, 2, 3].map(() => nodeVolunteer(server.url, net));
  const silent = vols[3];
  try {
    await waitFor('all four commit syncs', async () => vols.every((v) => v.runtime.status.syncs >= 3), 120_000, 200);
    const id = silent.runtime.status.volunteerId!;
    // The member's next local work stalls for 30 s: it answers nothing the job asks meanwhile.
    const local = silent.engine.local.bind(silent.engine);
    let stalled = false;
    silent.engine.local = async () => {
      if (!stalled) {
        stalled = true;
        await sleep(SILENCE_MS);
      }
      return local();
    };
    const rounds = async () => ((await server.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { seq: number; outcome: string; members: string[]; startedAt: number; endedAt: number | null }[]);
    await waitFor('the member stalls', async () => stalled, 30_000, 50);
    const silenceFrom = Date.now();
    await sleep(SILENCE_MS - 2_000);
    const windowEnd = Date.now();
    const during = (await rounds()).filter((r) => r.outcome === 'committed' && r.endedAt! >= silenceFrom && r.endedAt! <= windowEnd).sort((a, b) => a.seq - b.seq);
    // Time from the silence's start to the first commit, between commits, and from the last to the window's end.
    const times = [silenceFrom, ...during.map((r) => r.endedAt!), windowEnd];
    const gaps = times.slice(1).map((t, i) => t - times[i]);
    console.log(`${during.length} syncs committed in ${windowEnd - silenceFrom} ms of silence; waits ${gaps.join(', ')} ms`);
    assert.ok(during.length >= 10, `only ${during.length} syncs committed while the member was silent`);
    assert.ok(during.slice(1).every((r) => !r.members.includes(id)), 'the silent member is left out of those syncs');
    // The first sync after the silence began waited for the silent member up to the pace-derived
    // bound (4 × the median time to be ready + a 5 s floor, about 8 s here); none waited longer, and the rest not at all.
    assert.ok(Math.max(...gaps) < 15_000, `a sync waited ${Math.max(...gaps)} ms`);
    assert.ok(logs.some((l) => l.includes(`${id} is left out of sync`)), 'the server left it out');

    const syncsBefore = silent.runtime.status.syncs;
    await waitFor('the member reloads and contributes again', async () => silent.runtime.status.syncs >= syncsBefore + 2, 120_000, 200);
    assert.ok(logs.some((l) => l.includes(`${id} is ready with work for sync`) && l.includes('it reloads')), 'its stale work was dropped');
    assert.ok(!logs.some((l) => l.includes(`evicting ${id}`)), `evicted: ${logs.find((l) => l.includes(`evicting ${id}`))}`);
    for (const v of vols) assert.equal(v.runtime.status.lastError, null, `${v.runtime.status.volunteerId}: ${v.runtime.status.lastError}`);
  } finally {
    for (const v of vols) v.runtime.stop();
    await server.api(`/api/jobs/${job.id}/stop`, { method: 'POST' }).catch(() => {});
  }
});
