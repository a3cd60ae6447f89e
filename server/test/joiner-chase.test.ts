// A ring job's joiner on a link slower than the usual load: the sync is held for it at the pace
// joiners usually load, and when that runs out the sync goes on and the joiner must load the next
// model (the server sends it at the commit). Before, the next sync held it just as briefly, so a joiner
// slower than that pace chased each newer model for ever. Now the sync after one it missed waits for
// it longer, once: in a trusted job while its load is alive (its heartbeats show bytes coming in), in
// an untrusted one up to the load timeout, and for joiners without standing at most once per 10 load
// timeouts (before, each fresh identity that never finished loading held a sync a whole load timeout).
// Timed on a fake clock: the holds are server timers; the volunteers train in real time.
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { PROBATION_VERIFIED } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { SimVolunteer, startTestServer, waitFor } from '../src/testing';

const LOAD_TIMEOUT_MS = 120_000;
/**
 * The floor of the pace-derived bounds: the usual loads' hold and a load's first deadline are about
 * this long (the members load in milliseconds), so a model re-sent at a commit outlives the 5 s steps
 * of fake time until the joiner's next heartbeat extends it.
 */
const PACE_FLOOR_MS = 20_000;

/**
 * Two members that have synced twice, and a joiner that downloads the model it is sent and keeps it
 * back (`releaseLoad` reports it). Its heartbeat says more bytes came in every 5 s of fake time, as a
 * tab's on a slow link does, so its load deadline holds (model-loads.ts) and only the barrier's hold
 * decides whether a sync waits for it.
 */
async function slowJoiner(t: TestContext, trust: 'trusted' | 'untrusted' = 'trusted') {
  const clock = new FakeClock(Date.now());
  const server = await startTestServer({ clock, timing: {
    roundTimeoutMs: 600_000, barrierTimeoutMs: 600_000, loadTimeoutMs: LOAD_TIMEOUT_MS, deadlineFloorMs: PACE_FLOOR_MS,
  } });
  t.after(() => server.stop());
  const job = await server.createJob({ minWorkers: 2, maxWorkers: 4, trust, H: 1, targetSteps: 100_000, checkpointEvery: 1 });
  const members = [0, 1].map(() => new SimVolunteer({ url: server.url, oracle: server.oracle, trainMs: 20 }));
  const joiner = new SimVolunteer({ url: server.url, oracle: server.oracle, trainMs: 20 });
  t.after(() => {
    for (const s of [...members, joiner]) s.close();
  });
  for (const s of members) assert.equal((await s.request(job.id)).ok, true);
  await waitFor('2 syncs', () => members.every((s) => s.committed.length >= 2), 30_000);
  joiner.holdLoad = true;
  assert.equal((await joiner.request(job.id)).ok, true);
  await waitFor('the joiner downloaded a model', () => joiner.loadedFrom.length >= 1, 30_000);

  let downloaded = 0;
  const began = () => members[0].events.filter((e) => e.name === 'round:begin').length;
  /** `ms` of fake time pass, 5 s at a time, once both members wait at the barrier for the sync after `seq` (`who` says bytes come in). */
  const waitAtBarrier = async (seq: number, ms: number, progress = true, who = joiner) => {
    await waitFor(`both members ready for sync ${seq + 1}`, () => members.every((s) => s.readied.includes(seq + 1)), 30_000);
    await new Promise((r) => setTimeout(r, 200)); // the server has their round:ready
    for (let spent = 0; spent < ms; spent += 5_000) {
      if (progress) who.send('status', { state: 'loading', hidden: false, step: 0, samplesPerSec: 0, bytesSent: 0, bytesReceived: 0, downloadedBytes: (downloaded += 100_000) });
      await new Promise((r) => setTimeout(r, 20));
      await clock.advance(5_000);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  /** The usual loads' pace (the members loaded in milliseconds) runs out: the sync after `seq` commits without `who`, which is sent a newer model. */
  const missesSync = async (seq: number, who = joiner) => {
    const loads = who.loadedFrom.length;
    await waitAtBarrier(seq, PACE_FLOOR_MS + 10_000, true, who);
    await waitFor(`sync ${seq + 1} commits without the joiner`, () => members[0].committed.includes(seq + 1), 30_000);
    await waitFor('the joiner is sent the newer model', () => who.loadedFrom.length > loads, 30_000)
      .catch((e: Error) => { throw new Error(`${e.message}\n${server.logTail(30)}`); });
    const newer = who.loadedFrom.at(-1)!.seq;
    assert.ok(newer > seq, `sent the model of sync ${newer} after sync ${seq + 1} committed`);
    return newer;
  };
  return { server, job, members, joiner, began, waitAtBarrier, missesSync };
}

test('a joiner that missed a sync while it loaded holds the next one until it has loaded, and joins', async (t) => {
  const { server, joiner, began, waitAtBarrier, missesSync } = await slowJoiner(t);
  const second = await missesSync(joiner.loadedFrom[0].seq);

  // The next sync waits for it well past the usual pace (which let the last sync go on 20 s in).
  const beganBefore = began();
  await waitAtBarrier(second, 3 * PACE_FLOOR_MS);
  await new Promise((r) => setTimeout(r, 1_500));
  assert.equal(began(), beganBefore, `no sync began while the joiner that missed one loaded\n${server.logTail(20)}`);

  // It loads: the sync begins with all three, and the joiner commits.
  joiner.holdLoad = false;
  await joiner.releaseLoad();
  await waitFor('the joiner commits a sync', () => joiner.committed.length >= 1, 30_000)
    .catch((e: Error) => { throw new Error(`${e.message}\n${server.logTail(30)}`); });
  const joined = joiner.events.find((e) => e.name === 'round:begin')!.payload as { seq: number; members: string[] };
  assert.equal(joined.members.length, 3);
  assert.equal(joined.seq, second + 1, 'the sync after the model it loaded');
  assert.deepEqual(joiner.errors, []);
});

test('in a trusted job it is waited for while bytes come in, past the load timeout; once they stop, its load deadline evicts it and the sync goes on', async (t) => {
  const { server, members, joiner, began, waitAtBarrier, missesSync } = await slowJoiner(t);
  const second = await missesSync(joiner.loadedFrom[0].seq);
  const beganBefore = began();
  await waitAtBarrier(second, 2 * LOAD_TIMEOUT_MS);
  await new Promise((r) => setTimeout(r, 1_500));
  assert.equal(began(), beganBefore, `no sync began while its bytes came in\n${server.logTail(20)}`);
  // No more bytes: the load timeout after its last report, it is evicted and the sync begins without it.
  await waitAtBarrier(second, LOAD_TIMEOUT_MS + 5_000, false);
  await waitFor(`sync ${second + 1} commits without the joiner`, () => members[0].committed.includes(second + 1), 30_000)
    .catch((e: Error) => { throw new Error(`${e.message}\n${server.logTail(30)}`); });
  assert.match(server.logTail(40), new RegExp(`${joiner.volunteerId}.*model load timed out`));
});

test('in an untrusted job a joiner that never loads holds one sync up to the load timeout, and later ones only at the usual pace', async (t) => {
  const { server, members, joiner, waitAtBarrier, missesSync } = await slowJoiner(t, 'untrusted');
  const second = await missesSync(joiner.loadedFrom[0].seq);
  // The long hold runs out at the load timeout (its heartbeats still show bytes coming in): that sync goes on without it too.
  await waitAtBarrier(second, LOAD_TIMEOUT_MS + 5_000);
  await waitFor(`sync ${second + 1} commits without the joiner`, () => members[0].committed.includes(second + 1), 30_000)
    .catch((e: Error) => { throw new Error(`${e.message}\n${server.logTail(30)}`); });
  // And the next waits for it only at the usual pace again.
  await waitFor('the joiner is sent the model of that sync', () => joiner.loadedFrom.at(-1)!.seq > second, 30_000);
  await missesSync(joiner.loadedFrom.at(-1)!.seq);
  assert.equal(joiner.committed.length, 0);
  assert.deepEqual(joiner.errors, []);
});

/** A first joiner without standing takes its long hold and leaves; then another identity (with standing: a record of confirmed work) joins as slowly. */
async function secondSlowJoiner(t: TestContext, standing = false) {
  const chase = await slowJoiner(t, 'untrusted');
  const { server, job, members, joiner, waitAtBarrier, missesSync } = chase;
  const second = await missesSync(joiner.loadedFrom[0].seq);
  await waitAtBarrier(second, LOAD_TIMEOUT_MS + 5_000);
  await waitFor(`sync ${second + 1} commits without the first joiner`, () => members[0].committed.includes(second + 1), 30_000);
  // The members wait at the next barrier for the first joiner, which loads the model of that sync, while the
  // second one joins: so it is admitted between syncs. (Admitted while one ran, as when the members ran on
  // freely once the first had left, it was sent that sync's model at its commit without missing a hold, and
  // the hold the test took for its second one was the usual pace's: CI saw that sync begin.)
  await waitFor(`both members ready for sync ${second + 2}`, () => members.every((s) => s.readied.includes(second + 2)), 30_000);
  // A few minutes of fake time after the first one's long hold, well within 10 load timeouts.
  const clientId = standing ? 'standing-joiner-0123456789abcdef' : undefined;
  if (clientId) await server.store.addReputation(clientId, { verified: PROBATION_VERIFIED + 5 });
  const next = new SimVolunteer({ url: server.url, oracle: server.oracle, trainMs: 20, clientId });
  t.after(() => next.close());
  next.holdLoad = true;
  assert.equal((await next.request(job.id)).ok, true);
  await waitFor('the second joiner downloaded a model', () => next.loadedFrom.length >= 1, 30_000);
  assert.equal(next.loadedFrom[0].seq, second + 1);
  joiner.close();
  return { ...chase, next, missed: await missesSync(next.loadedFrom[0].seq, next) };
}

test('in an untrusted job a second joiner without standing soon after gets no long hold: fresh identities cannot stall every sync', async (t) => {
  const { next, missed, missesSync } = await secondSlowJoiner(t);
  // Before, this sync waited a whole load timeout for it, as for the first; now only the usual pace.
  await missesSync(missed, next);
  assert.equal(next.committed.length, 0);
  assert.deepEqual(next.errors, []);
});

test('in an untrusted job a second joiner with standing soon after is still held for up to the load timeout', async (t) => {
  const { server, members, next, missed, waitAtBarrier, began } = await secondSlowJoiner(t, true);
  const beganBefore = began();
  // The hold began when the members were ready, within the last 10 s of fake time missesSync let pass
  // (the sync before went on 20 s into its 30 s): so 30 s short of the load timeout is inside it.
  await waitAtBarrier(missed, LOAD_TIMEOUT_MS - 30_000, true, next);
  await new Promise((r) => setTimeout(r, 1_500));
  assert.equal(began(), beganBefore, `no sync began while the joiner with standing loaded\n${server.logTail(20)}`);
  assert.ok(!members[0].committed.includes(missed + 1));
});
