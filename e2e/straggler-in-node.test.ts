// No waiting on stragglers, against the real server: four volunteers (the worker runtime on the CPU
// backend, in-memory links) train; one stops answering (its local work stalls) until the server has
// left it out and two syncs committed without it, at least 30 s. The other three commit syncs throughout (auto pacing, the default), no sync waiting longer than the
// pace-derived bound the server logs; the silent one is left out of those syncs, not evicted, and when
// it answers again its stale work is dropped, it reloads the job's model and contributes again.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { MemoryNetwork } from '@tabfleet/collective';
import { startTestServer, waitFor, type TestServer } from '@tabfleet/server/testing';
import { nodeVolunteer } from '@tabfleet/worker/testing';

/** The least silence; it lasts until the server left the member out and two syncs committed without it. */
const SILENCE_MS = 30_000;

let server: TestServer;
const logs: string[] = [];
before(async () => {
  server = await startTestServer({ log: (l) => logs.push(l), timing: { roundTimeoutMs: 20_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 60_000 } });
});
after(() => server.stop());

test('one member of four silent for 30 s: the others commit throughout, it is left out, not evicted, and contributes after', { timeout: 600_000 }, async () => {
  const job = await server.createJob({
    // Auto pacing (the default): the server picks each member's steps from its pace, so the syncs'
    // length is its choice, and the test reads the wait bound it used from its log.
    trust: 'trusted', strategy: 'localsgd', H: 4, hyperparameters: { lr: 0.05, batchSize: 32 },
    // No checkpoint or evaluation falls in the silence (the returning member's reload asks for one).
    minWorkers: 3, maxWorkers: 4, targetSteps: 1_000_000, evalEverySteps: 1_000_000, checkpointEvery: 1_000,
  });
  const net = new MemoryNetwork();
  const vols = [0, 1, 2, 3].map(() => nodeVolunteer(server.url, net));
  const silent = vols[3];
  try {
    await waitFor('all four commit syncs', async () => vols.every((v) => v.runtime.status.syncs >= 3), 120_000, 200);
    const id = silent.runtime.status.volunteerId!;
    // The member's next local work stalls until the test releases it: it answers nothing the job asks
    // meanwhile. Released on what the server did, not after a fixed time, so a busy machine's slower
    // pace (a longer bound) does not end the silence before the server had reason to leave it out.
    const local = silent.engine.local.bind(silent.engine);
    let stalled = false;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    silent.engine.local = async () => {
      if (!stalled) {
        stalled = true;
        await released;
      }
      return local();
    };
    const rounds = async () => ((await server.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { seq: number; outcome: string; members: string[]; startedAt: number; endedAt: number | null }[]);
    await waitFor('the member stalls', async () => stalled, 30_000, 50);
    const silenceFrom = Date.now();
    const leftOutLine = () => logs.filter((l) => l.includes(`${id} is left out of sync`)).at(-1);
    await sleep(SILENCE_MS);
    await waitFor('the server leaves the silent member out', async () => !!leftOutLine(), 240_000, 200).catch(() => {});
    const withoutIt = async () => (await rounds()).filter((r) => r.outcome === 'committed' && r.endedAt! >= silenceFrom && !r.members.includes(id)).length;
    await waitFor('two syncs commit without it', async () => (await withoutIt()) >= 2, 240_000, 200)
      .catch(() => {});
    const windowEnd = Date.now();
    release();
    const during = (await rounds()).filter((r) => r.outcome === 'committed' && r.endedAt! >= silenceFrom && r.endedAt! <= windowEnd).sort((a, b) => a.seq - b.seq);
    // Time from the silence's start to the first commit, between commits, and from the last to the window's end.
    const times = [silenceFrom, ...during.map((r) => r.endedAt!), windowEnd];
    const gaps = times.slice(1).map((t, i) => t - times[i]);
    const leftOut = leftOutLine();
    // The pace-derived bound (4 × the median time members run past their budgets + 5 s), counted from
    // the first ready member, or from the end of a budget still running and a step of its member.
    const boundMs = Number(/, (\d+) ms after the first member was/.exec(leftOut ?? '')?.[1]);
    console.log(`${during.length} syncs committed in ${windowEnd - silenceFrom} ms of silence; waits ${gaps.join(', ')} ms; the bound ${boundMs} ms after the first ready member`);
    assert.ok(leftOut, 'the server left it out');
    assert.ok(boundMs >= 5_000 && boundMs < 120_000, `bound ${boundMs} ms: derived from the pace, not the configured 120 s barrier timeout (${leftOut})`);
    // The first sync in the silence waited its work, the bound and its exchange; none after waited for
    // the silent member: every gap after the first is under the bound, up to the window's end. (How
    // many syncs fit depends on the syncs auto chose and on the machine's load: 2 to 16 here.)
    const syncMs = Math.max(...gaps.slice(1));
    assert.ok(during.length >= 2, `only ${during.length} syncs committed while the member was silent`);
    assert.ok(during.slice(1).every((r) => !r.members.includes(id)), 'the silent member is left out of those syncs');
    assert.ok(gaps[0] <= boundMs + 2 * syncMs + 1_000, `the first sync took ${gaps[0]} ms: bound ${boundMs} ms, a sync at most ${syncMs} ms`);
    assert.ok(syncMs < boundMs, `a later sync took ${syncMs} ms, the bound ${boundMs} ms`);

    const syncsBefore = silent.runtime.status.syncs;
    await waitFor('the member reloads and contributes again', async () => silent.runtime.status.syncs >= syncsBefore + 2, 120_000, 200).catch((e: Error) => {
      throw new Error(`${e.message}; its status ${JSON.stringify(silent.runtime.status)}; the server on it:\n${logs.filter((l) => l.includes(id)).slice(-12).join('\n')}`);
    });
    assert.ok(logs.some((l) => l.includes(`${id} is ready with work for sync`) && l.includes('it reloads')), 'its stale work was dropped');
    assert.ok(!logs.some((l) => l.includes(`evicting ${id}`)), `evicted: ${logs.find((l) => l.includes(`evicting ${id}`))}`);
    for (const v of vols) assert.equal(v.runtime.status.lastError, null, `${v.runtime.status.volunteerId}: ${v.runtime.status.lastError}`);
  } finally {
    for (const v of vols) v.runtime.stop();
    await server.api(`/api/jobs/${job.id}/stop`, { method: 'POST' }).catch(() => {});
  }
});
