// The round clock's timeouts with fake time: a member slow to the barrier, a joiner that never loads
// and an uploader that never uploads are each evicted, and the rest go on.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { capabilitiesSchema, jobSpecSchema, modelDigest, PROBE_ROUND_ID, type VolunteerServerEvents } from '@tabfleet/protocol';
import { SqliteStore } from '../store/sqlite';
import type { JobRecord } from '../store/store';
import { SIM_CAPABILITIES, checkpointOf, initialParams } from '../testing/sim-volunteer';
import { PROBE_PEERS } from './join-probes';
import { JobCoordinator } from './job-coordinator';
import { LOAD_PROGRESS_CEILING } from './model-loads';
import type { Clock, CoordinatorDeps } from './types';

class FakeClock implements Clock {
  t = 1_000_000;
  private timers: { at: number; fn: () => void; live: boolean }[] = [];
  now = () => this.t;
  after(ms: number, fn: () => void) {
    const timer = { at: this.t + ms, fn, live: true };
    this.timers.push(timer);
    return () => void (timer.live = false);
  }
  advance(ms: number) {
    const end = this.t + ms;
    for (;;) {
      const next = this.timers.filter((x) => x.live && x.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!next) break;
      this.t = next.at;
      next.live = false;
      next.fn();
    }
    this.t = end;
  }
}

type Sent = { to: string; event: keyof VolunteerServerEvents; payload: any };

async function setup(spec: object, timing = { roundTimeoutMs: 1_000, barrierTimeoutMs: 2_000, loadTimeoutMs: 3_000 }) {
  const dir = mkdtempSync(join(tmpdir(), 'tabfleet-coord-'));
  const store = new SqliteStore(dir);
  const clock = new FakeClock();
  const sent: Sent[] = [];
  const deps: CoordinatorDeps = {
    store, clock, timing,
    toVolunteer: (to, event, payload) => {
      for (const id of Array.isArray(to) ? to : [to]) sent.push({ to: id, event, payload });
    },
    toDashboards: () => {},
    watched: () => true,
    checkpointUrl: (job, seq) => `http://x/${job}/${seq}`,
    count: () => {},
    log: () => {},
  };
  const job: JobRecord = {
    id: 'job-t', name: 't', state: 'waiting', createdAt: 0, updatedAt: 0, seq: 0, step: 0,
    // Fixed H unless a test says otherwise (auto, the default, is tested by name).
    spec: jobSpecSchema.parse({ preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 1, pacing: 'fixed', hyperparameters: { lr: 0.1, batchSize: 8 },
      minWorkers: 2, maxWorkers: 3, targetSteps: 100, checkpointEvery: 1000, trust: 'trusted' }),
    ...spec,
  };
  await store.createJob(job);
  const c = await JobCoordinator.load(job, deps);
  const caps = capabilitiesSchema.parse(SIM_CAPABILITIES);
  const add = (id: string) => c.join({ volunteerId: id, capabilities: caps });
  const last = (to: string, event: string) => [...sent].reverse().find((s) => s.to === to && s.event === event)?.payload;
  const loadAndReady = (id: string, seq = 0) => {
    c.handle(id, 'model:loaded', { jobId: job.id, seq, checksum: 'abcdef01' });
    c.handle(id, 'round:ready', { jobId: job.id, seq: seq + 1, step: 1 });
  };
  const result = (id: string, roundId: number) =>
    c.handle(id, 'round:result', { jobId: job.id, roundId, checksum: 'abcdef01', step: 1, metrics: { loss: 1, samples: 1, wallMs: 1, bytesSent: 0, bytesReceived: 0 } });
  /** Members a and b join, load, reach the barrier and commit sync 1. */
  const commitFirstSync = () => {
    add('a'); add('b');
    loadAndReady('a'); loadAndReady('b');
    const r1 = last('a', 'round:begin');
    result('a', r1.roundId); result('b', r1.roundId);
  };
  /** The round's evaluators report the model of its sync (digest of `flat`, the job's layout). */
  const evaluate = (round: { seq: number; evaluators: string[] }, flat: Float32Array) => {
    for (const id of round.evaluators) c.handle(id, 'metrics', { jobId: job.id, seq: round.seq, checksum: modelDigest(flat), accuracy: 0.5, loss: 1 });
  };
  const cleanup = async () => {
    await c.flushed();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { c, clock, sent, add, last, loadAndReady, result, commitFirstSync, evaluate, cleanup };
}

test('a member that never reaches the barrier is evicted after the barrier timeout', async () => {
  // (With no pace measured yet, the pace-derived bound is the configured barrier timeout itself.)
  const t = await setup({});
  t.add('a'); t.add('b'); t.add('c');
  t.loadAndReady('a'); t.loadAndReady('b');
  t.c.handle('c', 'model:loaded', { jobId: 'job-t', seq: 0, checksum: 'abcdef01' }); // loaded, but never ready
  assert.equal(t.last('a', 'round:begin'), undefined, 'the barrier waits for c');
  t.clock.advance(1_999);
  assert.equal(t.last('a', 'round:begin'), undefined);
  t.clock.advance(1);
  assert.match(t.last('c', 'job:end').reason, /not ready for 2 s/);
  assert.deepEqual(t.last('a', 'round:begin').members, ['a', 'b']);
  await t.cleanup();
});

test('a member not ready when the others are is left out of the sync, not evicted; when it reports it reloads the new model', async () => {
  // A barrier timeout of a minute; the pace-derived bound with instant work is its 5 s floor.
  const t = await setup({}, { roundTimeoutMs: 10_000, barrierTimeoutMs: 60_000, loadTimeoutMs: 10_000 });
  t.add('a'); t.add('b'); t.add('c');
  t.loadAndReady('a'); t.loadAndReady('b');
  t.c.handle('c', 'model:loaded', { jobId: 'job-t', seq: 0, checksum: 'abcdef01' }); // loaded, then slow
  t.clock.advance(4_999);
  assert.equal(t.last('a', 'round:begin'), undefined, 'the round waits for c up to the pace-derived bound');
  t.clock.advance(1);
  const r1 = t.last('a', 'round:begin');
  assert.deepEqual(r1.members, ['a', 'b'], 'the round goes on without c');
  assert.equal(t.last('c', 'job:end'), undefined, 'c is not evicted');
  assert.equal(t.c.workerCount, 3);
  t.result('a', r1.roundId); t.result('b', r1.roundId);
  assert.equal(t.last('a', 'round:commit').seq, 1);
  // c's work was for sync 1, which committed without it: dropped; c reloads as a joiner would.
  assert.deepEqual(t.c.handle('c', 'round:ready', { jobId: 'job-t', seq: 1, step: 1 }), { waiting: false, reload: true });
  assert.deepEqual(t.last('c', 'work:dropped'), { jobId: 'job-t', seq: 1 }, 'said as an event too (the runtime asks no ack)');
  t.c.handle('a', 'round:ready', { jobId: 'job-t', seq: 2, step: 2 });
  t.c.handle('b', 'round:ready', { jobId: 'job-t', seq: 2, step: 2 });
  const r2 = t.last('a', 'round:begin');
  assert.deepEqual(r2.members, ['a', 'b']);
  assert.ok(r2.uploader, 'c waits for a model: the sync is checkpointed');
  t.result('a', r2.roundId); t.result('b', r2.roundId);
  t.evaluate(r2, initialParams('mlp-fashion', 1));
  t.c.handle(r2.uploader, 'checkpoint:upload', { jobId: 'job-t', seq: 2, step: 2, data: checkpointOf('mlp-fashion', initialParams('mlp-fashion', 1)) });
  await t.c.flushed();
  for (let i = 0; i < 50 && t.last('c', 'model:load')?.seq !== 2; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(t.last('c', 'model:load').seq, 2, 'c loads the model of sync 2');
  // Silent past the configured barrier timeout: evicted.
  t.c.handle('c', 'model:loaded', { jobId: 'job-t', seq: 2, checksum: modelDigest(initialParams('mlp-fashion', 1)) });
  t.c.handle('a', 'round:ready', { jobId: 'job-t', seq: 3, step: 3 });
  t.c.handle('b', 'round:ready', { jobId: 'job-t', seq: 3, step: 3 });
  t.clock.advance(5_000);
  const r3 = t.last('a', 'round:begin');
  assert.deepEqual(r3.members, ['a', 'b'], 'c is left out again');
  t.result('a', r3.roundId); t.result('b', r3.roundId);
  t.clock.advance(60_000);
  t.c.handle('a', 'round:ready', { jobId: 'job-t', seq: 4, step: 4 });
  t.c.handle('b', 'round:ready', { jobId: 'job-t', seq: 4, step: 4 });
  assert.match(t.last('c', 'job:end').reason, /not ready for 6\d s/);
  await t.cleanup();
});

test('an uploader that never uploads is evicted after the load timeout; the joiner stays', async () => {
  const t = await setup({});
  t.commitFirstSync();
  assert.equal(t.last('a', 'round:commit').seq, 1);
  t.add('late'); // no checkpoint of sync 1: waits for the next round's upload
  t.c.handle('a', 'round:ready', { jobId: 'job-t', seq: 2, step: 2 });
  t.c.handle('b', 'round:ready', { jobId: 'job-t', seq: 2, step: 2 });
  const r2 = t.last('a', 'round:begin');
  assert.ok(r2.members.includes(r2.uploader), 'a joiner is waiting: the round names an uploader');
  t.result('a', r2.roundId); t.result('b', r2.roundId);
  t.evaluate(r2, initialParams('mlp-fashion', 1));
  // The uploader never uploads: it is evicted after the load timeout.
  t.clock.advance(3_000);
  assert.match(t.last(r2.uploader, 'job:end').reason, /did not upload the checkpoint of sync 2 in time/);
  assert.equal(t.c.workerCount, 2, 'the joiner and the remaining member stay');
  await t.cleanup();
});

test('an uploader whose evaluation takes most of its bound still has the upload\'s own time after it reports', async () => {
  // It uploads after its evaluation. Timed from the commit, a slow evaluation (a loaded machine,
  // members evaluating on one CPU) used up the upload's deadline and the uploader was evicted.
  const t = await setup({});
  t.commitFirstSync();
  t.add('late');
  t.c.handle('a', 'round:ready', { jobId: 'job-t', seq: 2, step: 2 });
  t.c.handle('b', 'round:ready', { jobId: 'job-t', seq: 2, step: 2 });
  const r2 = t.last('a', 'round:begin');
  assert.ok(r2.evaluators.includes(r2.uploader), 'the uploader evaluates the sync too');
  t.result('a', r2.roundId); t.result('b', r2.roundId);
  t.clock.advance(2_900); // just inside the evaluation's 3 s bound
  t.evaluate(r2, initialParams('mlp-fashion', 1));
  t.clock.advance(2_000); // past 3 s from the commit, inside 3 s from its report
  t.c.handle(r2.uploader, 'checkpoint:upload', { jobId: 'job-t', seq: 2, step: 2, data: checkpointOf('mlp-fashion', initialParams('mlp-fashion', 1)) });
  assert.equal(t.last(r2.uploader, 'job:end'), undefined, 'the uploader is not evicted');
  await t.c.flushed();
  for (let i = 0; i < 50 && t.last('late', 'model:load')?.seq !== 2; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(t.last('late', 'model:load')?.seq, 2, 'the checkpoint of sync 2 is stored and the joiner loads it');
  await t.cleanup();
});

test('a round whose members stay silent past the deadline evicts exactly the silent ones', async () => {
  const t = await setup({});
  t.add('a'); t.add('b'); t.add('c');
  for (const id of ['a', 'b', 'c']) t.loadAndReady(id);
  const r = t.last('a', 'round:begin');
  t.c.handle('a', 'round:failed', { jobId: 'job-t', roundId: r.roundId, code: 'deadline', message: '' });
  t.c.handle('b', 'round:failed', { jobId: 'job-t', roundId: r.roundId, code: 'peer_lost', message: '' });
  assert.equal(t.last('a', 'round:abort'), undefined, 'c has not answered yet');
  t.clock.advance(1_000);
  assert.match(t.last('a', 'round:abort').reason, /silent: c/);
  assert.match(t.last('c', 'job:end').reason, /deadline/);
  const again = t.last('a', 'round:begin');
  assert.deepEqual(again.members, ['a', 'b']);
  assert.equal(again.seq, r.seq);
  await t.cleanup();
});

/** Sync 1 committed by a and b, then a joiner `late` while they commit sync 2, which is checkpointed for it (uploaded, not yet stored). */
async function joinerAtSyncTwo() {
  const t = await setup({});
  t.commitFirstSync();
  t.add('late');
  for (const id of ['a', 'b']) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: 2, step: 2 });
  const r2 = t.last('a', 'round:begin');
  t.result('a', r2.roundId); t.result('b', r2.roundId);
  const model = initialParams('mlp-fashion', 1);
  t.evaluate(r2, model);
  t.c.handle(r2.uploader, 'checkpoint:upload', { jobId: 'job-t', seq: 2, step: 2, data: checkpointOf('mlp-fashion', model) });
  return { t, r2, model };
}

test('a joiner that never loads its model is evicted after the load timeout and the barrier is released', async () => {
  const { t, r2 } = await joinerAtSyncTwo();
  await t.c.flushed();
  assert.equal(t.last('late', 'model:load').seq, 2);
  for (const id of ['a', 'b']) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: 3, step: 3 });
  assert.equal(t.last('a', 'round:begin').roundId, r2.roundId, 'the barrier waits for the loading joiner');
  t.clock.advance(3_000);
  assert.match(t.last('late', 'job:end').reason, /load timed out/);
  assert.equal(t.last('a', 'round:begin').seq, 3);
  await t.cleanup();
});

test('a joiner whose heartbeats say its download is moving keeps loading past the load timeout, from its last progress, up to a ceiling', async () => {
  const { t } = await joinerAtSyncTwo();
  await t.c.flushed();
  assert.equal(t.last('late', 'model:load').seq, 2);
  const beat = (downloadedBytes?: number) => t.c.status('late', { state: 'loading', hidden: false, step: 0, samplesPerSec: 0, bytesSent: 0, bytesReceived: 0, downloadedBytes });
  const evicted = () => t.sent.some((s) => s.to === 'late' && s.event === 'job:end');
  // A report every 2 s with more bytes: 12 s in, four times the 3 s load timeout, it is still loading.
  for (let bytes = 1; bytes <= 6; bytes++) {
    t.clock.advance(2_000);
    beat(bytes * 65_536);
  }
  assert.equal(evicted(), false, 'still loading while bytes come in');
  // Heartbeats whose count does not grow (or carries none, or a lower one) give no time: evicted 3 s after the last growth.
  t.clock.advance(2_000);
  beat(6 * 65_536);
  beat();
  beat(65_536);
  beat(6 * 65_536);
  t.clock.advance(999);
  assert.equal(evicted(), false);
  t.clock.advance(1);
  assert.match(t.last('late', 'job:end').reason, /load timed out/);
  await t.cleanup();
});

test('a joiner the server keeps waiting for a shard download slot gets time as for bytes; a refusal of an admitted member\'s shard changes nothing', async () => {
  const { t } = await joinerAtSyncTwo();
  await t.c.flushed();
  const shardOf = (id: string) => t.last(id, 'job:assign').shard.index as number;
  const ended = (id: string) => t.sent.some((s) => s.to === id && s.event === 'job:end');
  for (let i = 0; i < 4; i++) {
    t.clock.advance(2_000);
    t.c.loads.downloadRefused(shardOf('late'));
    t.c.loads.downloadRefused(shardOf('a'));
  }
  assert.equal(ended('late'), false, '8 s in, refused every 2 s: still loading');
  t.clock.advance(2_999);
  assert.equal(ended('late'), false);
  t.clock.advance(1);
  assert.match(t.last('late', 'job:end').reason, /load timed out/);
  assert.equal(ended('a'), false);
  await t.cleanup();
});

test('a load that trickles bytes is evicted at LOAD_PROGRESS_CEILING load timeouts after it was sent', async () => {
  const { t } = await joinerAtSyncTwo();
  await t.c.flushed();
  let bytes = 0;
  for (let s = 0; s < LOAD_PROGRESS_CEILING * 3 + 3 && !t.sent.some((x) => x.to === 'late' && x.event === 'job:end'); s++) {
    t.clock.advance(1_000);
    t.c.status('late', { state: 'loading', hidden: false, step: 0, samplesPerSec: 0, bytesSent: 0, bytesReceived: 0, downloadedBytes: ++bytes });
  }
  assert.match(t.last('late', 'job:end').reason, /load timed out/);
  assert.equal(bytes, LOAD_PROGRESS_CEILING * 3, `evicted at the ceiling: ${LOAD_PROGRESS_CEILING} load timeouts of 3 s, one byte a second`);
  await t.cleanup();
});

test('a joiner is sent the checkpoint it waited for: the next sync waits until the store has written it', async () => {
  const { t, r2, model } = await joinerAtSyncTwo();
  // Ready for sync 3 before the store has written sync 2's checkpoint (not flushed yet).
  for (const id of ['a', 'b']) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: 3, step: 3 });
  assert.equal(t.last('a', 'round:begin').roundId, r2.roundId, 'sync 3 waits for the checkpoint the joiner needs');
  await t.c.flushed();
  assert.equal(t.last('late', 'model:load').seq, 2, 'the joiner is sent sync 2, the model the others hold');
  t.c.handle('late', 'model:loaded', { jobId: 'job-t', seq: 2, checksum: modelDigest(model) });
  t.c.handle('late', 'round:ready', { jobId: 'job-t', seq: 3, step: 3 });
  assert.deepEqual([...t.last('a', 'round:begin').members].sort(), ['a', 'b', 'late'], 'sync 3 has the joiner');
  await t.cleanup();
});

test('when every member holding the global model leaves, joiners restart from the latest checkpoint', async () => {
  const t = await setup({});
  t.commitFirstSync();
  assert.equal(t.c.summary().seq, 1);
  t.c.leave('a', 'closed');
  t.c.leave('b', 'closed');
  t.add('c');
  // No checkpoint exists: sync 1 is lost with its members, so c starts from the seeded model.
  assert.deepEqual([t.last('c', 'model:load').seq, t.last('c', 'model:load').url], [0, null]);
  assert.equal(t.c.summary().seq, 0);
  await t.cleanup();
});

/** A Moshpit job: 6 members in groups of at most 3, each group its own ring. */
const GROUPED = (spec: object) => ({ spec: jobSpecSchema.parse({ preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 1, pacing: 'fixed',
  hyperparameters: { lr: 0.1, batchSize: 8 }, minWorkers: 6, maxWorkers: 6, targetSteps: 100, checkpointEvery: 1000, trust: 'trusted', groupSize: 3, ...spec }) });
const SIX = ['a', 'b', 'c', 'd', 'e', 'f'];

/**
 * All six load, then all report ready: with minWorkers below six, members loading one by one would
 * meet a barrier already counting down for the first four, and (Moshpit) take sync 2 instead.
 */
function loadAllThenReady(t: Awaited<ReturnType<typeof setup>>): void {
  for (const id of SIX) t.c.handle(id, 'model:loaded', { jobId: 'job-t', seq: 0, checksum: 'abcdef01' });
  for (const id of SIX) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: 1, step: 1 });
}

test('Moshpit job: each group of a sync is a ring of its own, commits alone, and the groups change the next sync', async () => {
  const t = await setup(GROUPED({}));
  for (const id of SIX) t.add(id);
  for (const id of SIX) t.loadAndReady(id);
  const begins = SIX.map((id) => t.last(id, 'round:begin'));
  const groups = [...new Map(begins.map((b) => [b.roundId, b.members as string[]])).values()];
  assert.equal(groups.length, 2, 'two groups of three');
  assert.deepEqual(groups.flat().sort(), SIX);
  for (const b of begins) assert.equal(b.grouped, true);
  // A member may signal only its neighbours in its own group's ring.
  const [g0, g1] = groups;
  const r0 = t.last(g0[0], 'round:begin').roundId;
  assert.throws(() => t.c.handle(g0[0], 'signal', { jobId: 'job-t', roundId: r0, to: g1[0], data: { type: 'offer', sdp: 'x' } }), /not a ring neighbour/);
  // The first group commits at once; the second is still running.
  for (const id of g0) t.result(id, r0);
  for (const id of g0) assert.equal(t.last(id, 'round:commit').roundId, r0);
  for (const id of g1) assert.equal(t.last(id, 'round:commit'), undefined);
  // Its members go back to training and are ready for sync 2 while the other group finishes sync 1.
  for (const id of g0) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: 2, step: 2 });
  const r1 = t.last(g1[0], 'round:begin').roundId;
  for (const id of g1) t.result(id, r1);
  for (const id of g1) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: 2, step: 2 });
  const next = [...new Map(SIX.map((id) => t.last(id, 'round:begin')).map((b) => [b.roundId, b.members as string[]])).values()];
  assert.ok(SIX.every((id) => t.last(id, 'round:begin').seq === 2));
  assert.ok(next.every((g) => !groups.some((old) => old.join() === g.join())), 'sync 2 regroups (Moshpit: along the grid\'s other axis)');
  await t.cleanup();
});

test('regional Moshpit job with no hints: groups follow the round trips members report to their ring neighbours; a claim about anyone else is ignored', async () => {
  const EIGHT = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
  const site = (id: string) => (id < 'e' ? 'A' : 'B');
  const t = await setup(GROUPED({ minWorkers: 8, maxWorkers: 8, groupSize: 4, regionalGroups: true }));
  for (const id of EIGHT) t.add(id);
  for (const id of EIGHT) t.c.handle(id, 'model:loaded', { jobId: 'job-t', seq: 0, checksum: 'abcdef01' });
  const sitesPerGroup: number[][] = [];
  for (let seq = 1; seq <= 8; seq++) {
    for (const id of EIGHT) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq, step: seq });
    const groups = [...new Map(EIGHT.map((id) => t.last(id, 'round:begin')).map((b) => [b.roundId, b])).values()];
    assert.ok(groups.every((g) => g.seq === seq), `sync ${seq} began`);
    sitesPerGroup.push(groups.map((g) => new Set((g.members as string[]).map(site)).size));
    for (const g of groups) {
      const ring = g.members as string[];
      ring.forEach((id, i) => {
        const rttMs: Record<string, number> = {};
        for (const peer of [ring[(i + ring.length - 1) % ring.length], ring[(i + 1) % ring.length]]) if (peer !== id) rttMs[peer] = site(peer) === site(id) ? 2 : 80;
        // a claims a short link to h, whom it was not linked to: that would join the two sites.
        if (id === 'a' && !ring.includes('h')) rttMs.h = 1;
        t.c.handle(id, 'round:result', { jobId: 'job-t', roundId: g.roundId, checksum: 'abcdef01', step: seq, metrics: { loss: 1, samples: 1, wallMs: 1, bytesSent: 0, bytesReceived: 0 }, rttMs });
      });
    }
  }
  // A 4 × 2 grid: odd syncs in two groups of four. Once round trips are known, each of those is one site.
  assert.deepEqual(sitesPerGroup.slice(4).filter((_, i) => i % 2 === 0), [[1, 1], [1, 1]], JSON.stringify(sitesPerGroup));
  // The even syncs' pairs cross the sites.
  assert.deepEqual(sitesPerGroup.slice(4).filter((_, i) => i % 2 === 1), [[2, 2, 2, 2], [2, 2, 2, 2]], JSON.stringify(sitesPerGroup));
  await t.cleanup();
});

test('regional Moshpit joiners measure a few members before their first sync: named in the assignment, signaled between those pairs only, reported once; sync 1 is laid out by site', async () => {
  const EIGHT = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
  const site = (id: string) => (id < 'e' ? 'A' : 'B');
  const t = await setup(GROUPED({ minWorkers: 8, maxWorkers: 8, groupSize: 4, regionalGroups: true }));
  for (const id of EIGHT) t.add(id);
  const named = new Map<string, string[]>(EIGHT.map((id) => [id, t.last(id, 'job:assign').probePeers ?? []]));
  EIGHT.forEach((id, i) => assert.equal(named.get(id)!.length, Math.min(i, PROBE_PEERS), `${id} measures the members before it, at most ${PROBE_PEERS}`));
  assert.deepEqual(named.get('h')!.slice(0, 3), ['e', 'f', 'g'], 'the latest joiners first');
  for (const peer of named.get('h')!) assert.deepEqual(t.last(peer, 'peers:probe'), { jobId: 'job-t', peer: 'h' }, 'each named member is told, so it opens the link too');
  // Probe signaling is relayed both ways between a joiner and a member it was named, outside any round; not to others.
  const [peer] = named.get('h')!;
  t.c.handle('h', 'signal', { jobId: 'job-t', roundId: PROBE_ROUND_ID, to: peer, data: { sdp: 'offer' } });
  assert.deepEqual(t.last(peer, 'signal'), { jobId: 'job-t', roundId: PROBE_ROUND_ID, from: 'h', data: { sdp: 'offer' } });
  t.c.handle(peer, 'signal', { jobId: 'job-t', roundId: PROBE_ROUND_ID, to: 'h', data: { sdp: 'answer' } });
  assert.deepEqual(t.last('h', 'signal'), { jobId: 'job-t', roundId: PROBE_ROUND_ID, from: peer, data: { sdp: 'answer' } });
  const stranger = EIGHT.find((id) => id !== 'h' && !named.get('h')!.includes(id) && !named.get(id)!.includes('h'))!;
  assert.throws(() => t.c.handle('h', 'signal', { jobId: 'job-t', roundId: PROBE_ROUND_ID, to: stranger, data: {} }), /not a joiner and a member it was told to measure or load from/);
  // Each joiner reports its named members (2 ms inside a site, 80 across) and a short link to one it was not named: dropped.
  for (const id of EIGHT.slice(1)) {
    const rttMs = Object.fromEntries(named.get(id)!.map((p) => [p, site(p) === site(id) ? 2 : 80]));
    const unnamed = EIGHT.find((x) => x !== id && !named.get(id)!.includes(x) && site(x) !== site(id));
    if (unnamed) rttMs[unnamed] = 1;
    assert.deepEqual(t.c.handle(id, 'peers:rtt', { jobId: 'job-t', rttMs }), { kept: named.get(id)!.length });
  }
  assert.throws(() => t.c.handle('h', 'peers:rtt', { jobId: 'job-t', rttMs: {} }), /no probe is open/, 'one report per join');
  assert.throws(() => t.c.handle('a', 'peers:rtt', { jobId: 'job-t', rttMs: {} }), /no probe is open/, 'the first joiner was named nobody');
  // Sync 1 (groups of four along the grid's first axis) already keeps each site together.
  for (const id of EIGHT) t.c.handle(id, 'model:loaded', { jobId: 'job-t', seq: 0, checksum: 'abcdef01' });
  for (const id of EIGHT) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: 1, step: 1 });
  const groups = [...new Map(EIGHT.map((id) => t.last(id, 'round:begin')).map((b) => [b.roundId, b])).values()];
  assert.deepEqual(groups.map((g) => [g.seq, new Set((g.members as string[]).map(site)).size]), [[1, 1], [1, 1]], JSON.stringify(groups.map((g) => g.members)));
  await t.cleanup();
});

test('Moshpit job: a member lost from one group fails only that group; its survivors bring their work to the next sync', async () => {
  const t = await setup(GROUPED({ minWorkers: 4 }));
  for (const id of SIX) t.add(id);
  loadAllThenReady(t);
  const begins = new Map(SIX.map((id) => [id, t.last(id, 'round:begin')]));
  const [lost] = SIX;
  const failing = begins.get(lost).members as string[];
  const other = SIX.filter((id) => !failing.includes(id));
  t.c.leave(lost, 'tab closed');
  for (const id of failing.filter((x) => x !== lost)) {
    const abort = t.last(id, 'round:abort');
    assert.equal(abort.roundId, begins.get(lost).roundId);
    assert.deepEqual(abort.lost, [lost]);
  }
  for (const id of other) assert.equal(t.last(id, 'round:abort'), undefined, 'the other group is not aborted');
  const otherRound = begins.get(other[0]).roundId;
  for (const id of other) t.result(id, otherRound);
  for (const id of other) assert.equal(t.last(id, 'round:commit').seq, 1, 'the other group commits sync 1');
  // The survivors never send ready again: they are at the barrier of sync 2 with the work they hold.
  for (const id of other) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: 2, step: 2 });
  const sync2 = SIX.slice(1).map((id) => t.last(id, 'round:begin'));
  assert.ok(sync2.every((b) => b.seq === 2));
  assert.deepEqual(sync2.flatMap((b) => b.members).filter((x, i, xs) => xs.indexOf(x) === i).sort(), SIX.slice(1), 'every member left is in sync 2, the failed group\'s too');
  await t.cleanup();
});

test('Moshpit job: a group with a member silent past the deadline fails alone; the silent member is evicted, the other group committed', async () => {
  const t = await setup(GROUPED({ minWorkers: 4 }));
  for (const id of SIX) t.add(id);
  loadAllThenReady(t);
  const [silent] = SIX;
  const slowGroup = t.last(silent, 'round:begin').members as string[];
  const other = SIX.filter((id) => !slowGroup.includes(id));
  for (const id of other) t.result(id, t.last(id, 'round:begin').roundId);
  for (const id of slowGroup.filter((x) => x !== silent)) t.result(id, t.last(id, 'round:begin').roundId);
  t.clock.advance(1_000);
  assert.match(t.last(silent, 'job:end').reason, /missed the deadline/);
  for (const id of slowGroup.filter((x) => x !== silent)) {
    assert.match(t.last(id, 'round:abort').reason, new RegExp(`deadline passed; silent: ${silent}`));
    assert.equal(t.last(id, 'job:end'), undefined, 'members that answered stay');
  }
  for (const id of other) {
    assert.equal(t.last(id, 'round:commit').seq, 1);
    assert.equal(t.last(id, 'round:abort'), undefined);
  }
  await t.cleanup();
});

test('Moshpit job: a joiner mid-job holds no sync back, loading or training; its model may be a sync old, and it joins the sync after it is ready', async () => {
  const t = await setup(GROUPED({ minWorkers: 2, maxWorkers: 7 }));
  const syncAll = (seq: number) => {
    for (const id of SIX) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq, step: seq });
    for (const id of SIX) t.result(id, t.last(id, 'round:begin').roundId);
  };
  for (const id of SIX) t.add(id);
  for (const id of SIX) t.c.handle(id, 'model:loaded', { jobId: 'job-t', seq: 0, checksum: 'abcdef01' });
  syncAll(1);
  t.add('late');
  syncAll(2);
  const r2 = t.last('a', 'round:begin');
  const model = initialParams('mlp-fashion', 1);
  t.evaluate(r2, model);
  t.c.handle(r2.uploader, 'checkpoint:upload', { jobId: 'job-t', seq: 2, step: 2, data: checkpointOf('mlp-fashion', model) });
  await t.c.flushed();
  assert.equal(t.last('late', 'model:load').seq, 2);
  // Sync 3 begins while the joiner loads (a one-ring job would hold it for the joiner's load).
  syncAll(3);
  assert.equal(t.last('a', 'round:begin').seq, 3);
  assert.equal(t.c.summary().seq, 3);
  // It loaded sync 2's model: admitted all the same, and sync 4 does not wait for its work.
  assert.deepEqual(t.c.handle('late', 'model:loaded', { jobId: 'job-t', seq: 2, checksum: modelDigest(model) }), { admitted: true });
  for (const id of SIX) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: 4, step: 4 });
  assert.equal(t.last('a', 'round:begin').seq, 4);
  assert.equal(t.last('late', 'round:begin'), undefined);
  for (const id of SIX) t.result(id, t.last(id, 'round:begin').roundId);
  // Ready with work for sync 3 (its model's next): it takes part in sync 5.
  t.c.handle('late', 'round:ready', { jobId: 'job-t', seq: 3, step: 3 });
  for (const id of SIX) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: 5, step: 5 });
  assert.equal(t.last('late', 'round:begin').seq, 5);
  await t.cleanup();
});

test('hierarchical Moshpit job: tabs behind one address are always in one group, side by side in its ring', async () => {
  const t = await setup(GROUPED({ groupSize: 2, hierarchical: true }));
  const caps = capabilitiesSchema.parse(SIM_CAPABILITIES);
  const addressOf: Record<string, string | undefined> = { a: '10.0.0.1', b: '10.0.0.2', c: '10.0.0.1', d: undefined, e: '10.0.0.2', f: undefined };
  for (const id of SIX) t.c.join({ volunteerId: id, capabilities: caps, address: addressOf[id] });
  for (const id of SIX) t.loadAndReady(id);
  for (let seq = 1; seq <= 4; seq++) {
    const begins = new Map(SIX.map((id) => [id, t.last(id, 'round:begin')]));
    assert.ok([...begins.values()].every((b) => b.seq === seq));
    const groups = [...new Map([...begins.values()].map((b) => [b.roundId, b.members as string[]])).values()];
    assert.deepEqual(groups.flat().sort(), SIX);
    for (const [x, y] of [['a', 'c'], ['b', 'e']]) {
      const g = groups.find((m) => m.includes(x))!;
      assert.ok(g.includes(y), `sync ${seq}: ${x} and ${y} share an address but not a group (${g.join(' ')})`);
      assert.equal(Math.abs(g.indexOf(x) - g.indexOf(y)), 1, `sync ${seq}: ring neighbours`);
    }
    for (const g of groups) for (const id of g) t.result(id, begins.get(id)!.roundId);
    for (const id of SIX) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: seq + 1, step: seq + 1 });
  }
  assert.throws(() => jobSpecSchema.parse({ ...GROUPED({}).spec, groupSize: undefined, maxWorkers: 6, hierarchical: true }), /hierarchical averaging arranges Moshpit groups: set groupSize/);
  await t.cleanup();
});

test('Moshpit job: once the first sync\'s barrier counts down, a joiner admitted well after the first member takes sync 2; the first sync does not wait for its work', async () => {
  const t = await setup(GROUPED({ minWorkers: 4 }), { roundTimeoutMs: 10_000, barrierTimeoutMs: 60_000, loadTimeoutMs: 60_000 });
  const first = ['a', 'b', 'c', 'd'];
  for (const id of [...first, 'e', 'f']) t.add(id);
  for (const id of first) t.c.handle(id, 'model:loaded', { jobId: 'job-t', seq: 0, checksum: 'abcdef01' });
  t.clock.advance(2_000);
  for (const id of ['a', 'b', 'c']) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: 1, step: 1 });
  // d still trains: the barrier counts down. f is admitted (loaded) 2 s after the first four: it
  // opened with them, a moment apart, and is waited for ...
  t.c.handle('f', 'model:loaded', { jobId: 'job-t', seq: 0, checksum: 'abcdef01' });
  t.c.handle('f', 'round:ready', { jobId: 'job-t', seq: 1, step: 1 });
  // ... but e is admitted 6 s after them (with churn, a joiner every second): waiting for its first
  // work would hold the sync that long, so it is not.
  t.clock.advance(4_000);
  t.c.handle('e', 'model:loaded', { jobId: 'job-t', seq: 0, checksum: 'abcdef01' });
  t.c.handle('d', 'round:ready', { jobId: 'job-t', seq: 1, step: 1 });
  const r1 = t.last('a', 'round:begin');
  assert.ok(r1, 'sync 1 begins once the first five are ready, without waiting for e\'s work');
  assert.equal(t.last('f', 'round:begin')?.seq, 1, 'f joined within the grace: it is in sync 1');
  assert.equal(t.last('e', 'round:begin'), undefined);
  const inSync1 = [...first, 'f'];
  for (const g of new Set(inSync1.map((id) => t.last(id, 'round:begin').roundId))) for (const id of inSync1.filter((x) => t.last(x, 'round:begin').roundId === g)) t.result(id, g);
  t.c.handle('e', 'round:ready', { jobId: 'job-t', seq: 1, step: 1 });
  for (const id of inSync1) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: 2, step: 2 });
  assert.equal(t.last('e', 'round:begin')?.seq, 2, 'e is in sync 2 with its work');
  await t.cleanup();
});

test('paced Moshpit job: each group\'s begin carries the steps of its own members (the weights of its mean), and its commit their next steps', async () => {
  const t = await setup(GROUPED({ pacing: 'paced', roundBudgetMs: 1_000, H: 4 }));
  for (const id of SIX) t.add(id);
  for (const id of SIX) t.loadAndReady(id);
  const begin = t.last('a', 'round:begin');
  assert.deepEqual(Object.keys(begin.steps).sort(), [...begin.members].sort());
  assert.ok(Object.values(begin.steps).every((n) => n === 16), 'before their paces are known, members train for the budget, given half of 8 × H');
  for (const id of begin.members) t.c.handle(id, 'round:result', { jobId: 'job-t', roundId: begin.roundId, checksum: 'abcdef01', step: 16, metrics: { loss: 1, samples: 128,
    wallMs: 1600, computeMs: 1600, bytesSent: 0, bytesReceived: 0 } });
  const commit = t.last('a', 'round:commit');
  assert.deepEqual(Object.keys(commit.steps).sort(), [...begin.members].sort());
  // Its first sync's 16 steps took 1.6 s: a 1 s budget fits 10.
  assert.equal(commit.steps.a, 10);
  await t.cleanup();
});

test('job spec: Moshpit groups only for LocalSGD (fixed or paced), trusted ones without compression; past 256 members only with groups', () => {
  const base = { preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', hyperparameters: { lr: 0.1, batchSize: 8 }, targetSteps: 10, trust: 'trusted' };
  assert.equal(jobSpecSchema.parse({ ...base, groupSize: 8, maxWorkers: 10_000 }).maxWorkers, 10_000);
  assert.throws(() => jobSpecSchema.parse({ ...base, maxWorkers: 257 }), /set groupSize/);
  assert.throws(() => jobSpecSchema.parse({ ...base, groupSize: 8, maxWorkers: 10_001 }), /maxWorkers/);
  assert.equal(jobSpecSchema.parse({ ...base, groupSize: 8, trust: 'untrusted', maxWorkers: 64 }).groupSize, 8);
  assert.throws(() => jobSpecSchema.parse({ ...base, groupSize: 17, trust: 'untrusted', maxWorkers: 64 }), /at most 16 members/);
  assert.throws(() => jobSpecSchema.parse({ ...base, groupSize: 8, strategy: 'diloco' }), /built for localsgd/);
  assert.throws(() => jobSpecSchema.parse({ ...base, groupSize: 8, compression: 'dgc' }), /each hold their last group's model, so there is none: use DGC in one ring without groupSize/);
  assert.throws(() => jobSpecSchema.parse({ ...base, groupSize: 8, compression: 'fp16' }), /f32 parameters in a trusted job's rings \(compression: none/);
  assert.throws(() => jobSpecSchema.parse({ ...base, groupSize: 1 }), /groupSize/);
  assert.throws(() => jobSpecSchema.parse({ ...base, groupSize: 8, pacing: 'auto' }), /pacing: fixed or paced/);
  assert.equal(jobSpecSchema.parse({ ...base, groupSize: 8, pacing: 'paced' }).groupSize, 8);
});

test('paced LocalSGD: the commit carries the time budget, and a member that stopped at it is weighed by the steps it reports, never past twice those given', async () => {
  const spec = jobSpecSchema.parse({ preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 4, pacing: 'paced', roundBudgetMs: 1_000,
    hyperparameters: { lr: 0.1, batchSize: 8 }, minWorkers: 2, maxWorkers: 2, targetSteps: 1000, checkpointEvery: 1000, trust: 'trusted' });
  const t = await setup({ spec });
  t.add('a'); t.add('b');
  // Paces unknown: the first work is time-boxed (the job's budget), given half of 8 × H, so at most 8 × H.
  assert.deepEqual(t.c.handle('a', 'model:loaded', { jobId: 'job-t', seq: 0, checksum: 'abcdef01' }), { admitted: true, steps: 16, budgetMs: 1_000 });
  assert.throws(() => t.c.handle('a', 'round:ready', { jobId: 'job-t', seq: 1, step: 33, steps: 33 }), /at most 32/);
  t.c.handle('a', 'round:ready', { jobId: 'job-t', seq: 1, step: 12, steps: 12 });
  t.loadAndReady('b');
  const r1 = t.last('a', 'round:begin');
  assert.deepEqual(r1.steps, { a: 12, b: 16 }, 'what a member reports it took, else what it was given');
  for (const [id, steps] of [['a', 12], ['b', 16]] as const) t.c.handle(id, 'round:result', { jobId: 'job-t', roundId: r1.roundId, checksum: 'abcdef01', step: steps,
    metrics: { loss: 1, samples: 8 * steps, wallMs: 100 * steps, computeMs: 100 * steps, bytesSent: 0, bytesReceived: 0 } });
  const commit = t.last('a', 'round:commit');
  assert.equal(commit.budgetMs, 1_000, 'members stop at the budget');
  assert.equal(commit.steps.a, 10, '100 ms per step: 10 fit the budget');
  // b's steps ran slow this time: it stopped after 6. More than twice the 10 given is refused, and changes nothing.
  assert.throws(() => t.c.handle('b', 'round:ready', { jobId: 'job-t', seq: 2, step: 7, steps: 21 }), /at most 20/);
  t.c.handle('b', 'round:ready', { jobId: 'job-t', seq: 2, step: 7, steps: 6 });
  t.c.handle('a', 'round:ready', { jobId: 'job-t', seq: 2, step: 11 });
  const r2 = t.last('a', 'round:begin');
  assert.deepEqual(r2.steps, { a: 10, b: 6 }, 'the weights of the sync: what each took');
  await t.cleanup();
});

test('untrusted paced LocalSGD: a member may claim at most the steps it was given, and its pace is the server\'s time, not its computeMs', async () => {
  const spec = jobSpecSchema.parse({
    preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 4, pacing: 'paced', roundBudgetMs: 1_000,
    hyperparameters: { lr: 0.1, batchSize: 8 }, minWorkers: 2, maxWorkers: 2, targetSteps: 1000, checkpointEvery: 1000, trust: 'untrusted',
  });
  const t = await setup({ spec });
  t.add('a'); t.add('b');
  // Paces unknown: the first work is time-boxed, given the whole cap of 8 × H (its ceiling: what is given).
  for (const id of ['a', 'b']) assert.deepEqual(t.c.handle(id, 'model:loaded', { jobId: 'job-t', seq: 0, checksum: 'abcdef01' }), { admitted: true, steps: 32, budgetMs: 1_000 });
  t.clock.advance(1_000);
  assert.throws(() => t.c.handle('a', 'round:ready', { jobId: 'job-t', seq: 1, step: 33, steps: 33 }), /33 local steps: at most 32 \(the steps given, in an untrusted job\)/);
  t.c.handle('a', 'round:ready', { jobId: 'job-t', seq: 1, step: 32, steps: 32 });
  t.clock.advance(250);
  t.c.handle('b', 'round:ready', { jobId: 'job-t', seq: 1, step: 25, steps: 25 });
  const r1 = t.last('a', 'round:begin');
  assert.equal(r1.mode, 'group');
  assert.deepEqual(r1.steps, { a: 32, b: 25 }, 'the weights: what each claimed, at most what it was given');
  const group = { refused: [], digests: { sent: ['abcdef01', 'abcdef01'], received: ['abcdef01', 'abcdef01'], aggregate: 'abcdef01', gathered: ['abcdef01', 'abcdef01'] } };
  // a claims its 32 steps took 1 ms; b says 1,000 ms for its 25. The server saw 1,000 and 1,250.
  for (const [id, computeMs] of [['a', 1], ['b', 1_000]] as const) {
    const metrics = { loss: 1, samples: 8, wallMs: computeMs, computeMs, bytesSent: 0, bytesReceived: 0 };
    t.c.handle(id, 'round:result', { jobId: 'job-t', roundId: r1.roundId, checksum: 'abcdef01', step: 1, metrics, group });
  }
  const pace = (id: string) => t.c.workers().find((w) => w.volunteerId === id)!.pace!.msPerStep;
  assert.equal(pace('a'), 31.3, '1,000 ms over its 32 steps, not 1 ms');
  assert.equal(pace('b'), 50, '1,250 ms over its 25 steps');
  await t.cleanup();
});

test('paced LocalSGD: a member not ready is left out a pace-derived time past its budget, counted from the latest budget still running', async () => {
  // Budgets of 10 s that members end 100 ms past, at 625 ms a step: the bound is 4 × that overrun + 5 s,
  // + a step of the slowest member (it may end a step past its budget), not 4 × the 10 s + 5 s.
  const spec = jobSpecSchema.parse({ preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 4, pacing: 'paced', roundBudgetMs: 10_000,
    hyperparameters: { lr: 0.1, batchSize: 8 }, minWorkers: 2, maxWorkers: 3, targetSteps: 100_000, checkpointEvery: 1000, trust: 'trusted' });
  const t = await setup({ spec }, { roundTimeoutMs: 10_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 10_000 });
  const ready = (id: string, seq: number) => t.c.handle(id, 'round:ready', { jobId: 'job-t', seq, step: seq, steps: 16 });
  const commit = (ids: string[]) => {
    const r = t.last(ids[0], 'round:begin');
    for (const id of ids) t.c.handle(id, 'round:result', { jobId: 'job-t', roundId: r.roundId, checksum: 'abcdef01', step: r.seq, metrics: { loss: 1, samples: 128, wallMs: 10_000,
      computeMs: 10_000, bytesSent: 0, bytesReceived: 0 } });
    return t.last(ids[0], 'round:commit');
  };
  for (const id of ['a', 'b', 'c']) t.add(id);
  for (const id of ['a', 'b', 'c']) t.c.handle(id, 'model:loaded', { jobId: 'job-t', seq: 0, checksum: 'abcdef01' });
  t.clock.advance(10_100);
  for (const id of ['a', 'b', 'c']) ready(id, 1);
  assert.equal(commit(['a', 'b', 'c']).budgetMs, 10_000);
  // Sync 2: c goes silent. a and b end 100 ms past the budget, as before.
  t.clock.advance(10_100);
  ready('a', 2); ready('b', 2);
  t.clock.advance(6_024);
  assert.equal(t.last('a', 'round:begin').seq, 1, 'c is waited for 4 × 100 ms + 5 s + 625 ms');
  t.clock.advance(1);
  assert.deepEqual(t.last('a', 'round:begin').members, ['a', 'b'], 'then left out');
  assert.equal(t.last('c', 'job:end'), undefined, 'not evicted');
  commit(['a', 'b']);
  // Sync 3: a stops early (its step ceiling); b is not left out while its budget runs, nor for the bound after.
  t.clock.advance(2_000);
  ready('a', 3);
  t.clock.advance(8_000 + 6_024);
  assert.equal(t.last('a', 'round:begin').seq, 2, 'b is waited for until its budget ends, then the bound');
  ready('b', 3);
  assert.deepEqual(t.last('a', 'round:begin').members, ['a', 'b']);
  await t.cleanup();
});

test('paced LocalSGD: a member whose one step is longer than the budget is waited for that step, not left out every sync', async () => {
  // 1-s budgets; a and c at 100 ms a step, b at 8 s (it takes at least one step). Sync 1, its pace
  // unknown: 4 s for a step; then its measured 8 s.
  const spec = jobSpecSchema.parse({ preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 4, pacing: 'paced', roundBudgetMs: 1_000,
    hyperparameters: { lr: 0.1, batchSize: 8 }, minWorkers: 2, maxWorkers: 3, targetSteps: 100_000, checkpointEvery: 1000, trust: 'trusted' });
  const t = await setup({ spec }, { roundTimeoutMs: 10_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 10_000 });
  const steps = { a: 10, b: 1, c: 10 } as const;
  const syncWork = (seq: number) => {
    t.clock.advance(1_000);
    for (const id of ['a', 'c'] as const) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq, step: seq, steps: steps[id] });
    t.clock.advance(7_000);
    t.c.handle('b', 'round:ready', { jobId: 'job-t', seq, step: seq, steps: 1 });
    const r = t.last('a', 'round:begin');
    assert.equal(r?.seq, seq, `sync ${seq} began`);
    assert.deepEqual(r.members, ['a', 'b', 'c'], `b is in sync ${seq}`);
    for (const id of ['a', 'b', 'c'] as const) {
      const computeMs = id === 'b' ? 8_000 : 100 * steps[id];
      t.c.handle(id, 'round:result', { jobId: 'job-t', roundId: r.roundId, checksum: 'abcdef01', step: seq, metrics: { loss: 1, samples: 8 * steps[id], wallMs: computeMs,
        computeMs, bytesSent: 0, bytesReceived: 0 } });
    }
  };
  for (const id of ['a', 'b', 'c']) t.add(id);
  for (const id of ['a', 'b', 'c']) t.c.handle(id, 'model:loaded', { jobId: 'job-t', seq: 0, checksum: 'abcdef01' });
  for (const seq of [1, 2, 3]) syncWork(seq);
  await t.cleanup();
});

test('paced LocalSGD: the barrier never waits longer than the configured barrier timeout, whatever the budget', async () => {
  // A 118-s budget + an unmeasured member's 4-s step + the 5-s floor would be 127 s: capped at 120 s.
  const spec = jobSpecSchema.parse({ preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 4, pacing: 'paced', roundBudgetMs: 118_000,
    hyperparameters: { lr: 0.1, batchSize: 8 }, minWorkers: 2, maxWorkers: 3, targetSteps: 100_000, checkpointEvery: 1000, trust: 'trusted' });
  const t = await setup({ spec }, { roundTimeoutMs: 10_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 10_000 });
  for (const id of ['a', 'b', 'c']) t.add(id);
  for (const id of ['a', 'b', 'c']) t.c.handle(id, 'model:loaded', { jobId: 'job-t', seq: 0, checksum: 'abcdef01' });
  for (const id of ['a', 'b']) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: 1, step: 1, steps: 1 });
  t.clock.advance(119_999);
  assert.equal(t.last('a', 'round:begin'), undefined);
  t.clock.advance(1);
  assert.deepEqual(t.last('a', 'round:begin').members, ['a', 'b'], 'c is given up on at the barrier timeout');
  await t.cleanup();
});

test('paced LocalSGD: a joiner mid-job works until a second before the others\' budgets end, not one second from its start', async () => {
  const spec = jobSpecSchema.parse({ preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 4, pacing: 'paced', roundBudgetMs: 10_000,
    hyperparameters: { lr: 0.1, batchSize: 8 }, minWorkers: 2, maxWorkers: 3, targetSteps: 100_000, checkpointEvery: 1, trust: 'trusted' });
  const t = await setup({ spec }, { roundTimeoutMs: 10_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 10_000 });
  t.add('a'); t.add('b');
  for (const id of ['a', 'b']) t.c.handle(id, 'model:loaded', { jobId: 'job-t', seq: 0, checksum: 'abcdef01' });
  t.clock.advance(10_000);
  for (const id of ['a', 'b']) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: 1, step: 16, steps: 16 });
  const r1 = t.last('a', 'round:begin');
  t.add('c');
  for (const id of ['a', 'b']) t.c.handle(id, 'round:result', { jobId: 'job-t', roundId: r1.roundId, checksum: 'abcdef01', step: 16, metrics: { loss: 1, samples: 128,
    wallMs: 10_000, computeMs: 10_000, bytesSent: 0, bytesReceived: 0 } });
  assert.equal(t.last('a', 'round:commit').budgetMs, 10_000);
  const model = initialParams('mlp-fashion', 1);
  t.evaluate(r1, model);
  t.c.handle(r1.uploader, 'checkpoint:upload', { jobId: 'job-t', seq: 1, step: 16, data: checkpointOf('mlp-fashion', model) });
  await t.c.flushed();
  for (let i = 0; i < 50 && t.last('c', 'model:load')?.seq !== 1; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(t.last('c', 'model:load').seq, 1);
  // c loads 4 s into a and b's 10-s budgets: it works 5 s, ready a second before they are.
  t.clock.advance(4_000);
  assert.deepEqual(t.c.handle('c', 'model:loaded', { jobId: 'job-t', seq: 1, checksum: modelDigest(model) }), { admitted: true, steps: 16, budgetMs: 5_000 });
  await t.cleanup();
});

test('a paced job ends on its target: syncs that could pass it give at most the steps left, with no budget', async () => {
  // Target 30: sync 1 takes one step (paces unknown, and a time box's ceiling of 8 × H could pass the
  // target: an eighth of H, at least one, no budget); then 10 fit each member's budget.
  const spec = jobSpecSchema.parse({ preset: 'mlp-fashion', dataset: 'fashion-mnist', strategy: 'localsgd', H: 4, pacing: 'paced', roundBudgetMs: 1_000,
    hyperparameters: { lr: 0.1, batchSize: 8 }, minWorkers: 2, maxWorkers: 2, targetSteps: 30, checkpointEvery: 1000, trust: 'trusted' });
  const t = await setup({ spec });
  // 100 ms a step, every step.
  const sync = (step: number, steps: number) => {
    const r = t.last('a', 'round:begin');
    for (const id of ['a', 'b']) t.c.handle(id, 'round:result', { jobId: 'job-t', roundId: r.roundId, checksum: 'abcdef01', step, metrics: { loss: 1, samples: 8 * steps,
      wallMs: 100 * steps, computeMs: 100 * steps, bytesSent: 0, bytesReceived: 0 } });
    return t.last('a', 'round:commit');
  };
  t.add('a'); t.add('b');
  t.loadAndReady('a'); t.loadAndReady('b');
  // 29 left: members stop at the budget (at most twice the 10 given: 20, short of the target).
  const c1 = sync(1, 1);
  assert.deepEqual([c1.steps, c1.budgetMs], [{ a: 10, b: 10 }, 1_000]);
  for (const id of ['a', 'b']) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: 2, step: 11, steps: 10 });
  // 19 left: twice 10 would pass the target, so 10 each and no budget.
  const c2 = sync(11, 10);
  assert.deepEqual([c2.steps, c2.budgetMs], [{ a: 10, b: 10 }, undefined]);
  // Without a budget a member does what it is given and does not report steps.
  for (const id of ['a', 'b']) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: 3, step: 21 });
  // 9 left: 9 each.
  const c3 = sync(21, 10);
  assert.deepEqual([c3.steps, c3.budgetMs], [{ a: 9, b: 9 }, undefined]);
  for (const id of ['a', 'b']) t.c.handle(id, 'round:ready', { jobId: 'job-t', seq: 4, step: 30 });
  assert.deepEqual([c1.step, c2.step, c3.step, sync(30, 9).step], [1, 11, 21, 30], 'the job\'s step after each sync');
  await t.cleanup();
});

test('a fixed job\'s member does not report its steps: refused, and it is still waited for', async () => {
  const t = await setup({});
  t.add('a'); t.add('b');
  t.c.handle('a', 'model:loaded', { jobId: 'job-t', seq: 0, checksum: 'abcdef01' });
  assert.throws(() => t.c.handle('a', 'round:ready', { jobId: 'job-t', seq: 1, step: 1, steps: 1 }), /only a paced localsgd or diloco member reports its steps/);
  t.loadAndReady('b');
  t.c.handle('a', 'round:ready', { jobId: 'job-t', seq: 1, step: 1 });
  assert.deepEqual(t.last('a', 'round:begin').members, ['a', 'b']);
  await t.cleanup();
});
