// A Moshpit job whose syncs commit faster than its checkpoints are stored: a joiner loads the newest
// checkpoint, whatever its sync, and joins the groups. Before, a Moshpit joiner was sent only a
// checkpoint of the current sync; every upload (400 ms here, a slow link) came in after the next
// sync had committed, so the joiner was never sent a model (seen by h-adaptive's capture benchmark,
// which had to slow its members down).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { RoundBegin } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { SimVolunteer, startTestServer, waitFor, type TestServer } from '../src/testing';

let server: TestServer;
before(async () => {
  // The load bound is a hang bound: at 10 s a joiner was evicted once, run beside a busy browser test.
  server = await startTestServer({ timing: { roundTimeoutMs: 10_000, barrierTimeoutMs: 10_000, loadTimeoutMs: 30_000 } });
});
after(() => server.stop());

test('a Moshpit joiner loads the newest checkpoint though syncs outrun checkpoint uploads, and joins a group', async () => {
  const job = await server.createJob({ minWorkers: 8, maxWorkers: 9, trust: 'trusted', groupSize: 4, H: 1, targetSteps: 100_000, checkpointEvery: 1 });
  const slowUploads = { uploadDelayMs: 400 };
  const sims = Array.from({ length: 8 }, () => new SimVolunteer({ url: server.url, oracle: server.oracle, ...slowUploads }));
  let joiner: SimVolunteer | null = null;
  try {
    for (const s of sims) await s.connected();
    for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
    await waitFor('5 syncs', () => sims.every((s) => s.committed.length >= 5), 30_000);
    joiner = new SimVolunteer({ url: server.url, oracle: server.oracle, ...slowUploads });
    await joiner.connected();
    assert.equal((await joiner.request(job.id)).ok, true);
    const j = joiner;
    const load = await waitFor('the joiner is sent a model', () => j.events.find((e) => e.name === 'model:load')?.payload as { seq: number } | undefined, 30_000);
    const seqAtLoad = Math.max(...sims.map((s) => s.committed.length));
    console.log(`the joiner was sent the checkpoint of sync ${load.seq}; the job was at sync ${seqAtLoad}`);
    await waitFor('the joiner is in a group round that commits', () => j.committed.length >= 1, 30_000);
    const begin = j.events.find((e) => e.name === 'round:begin')!.payload as RoundBegin;
    assert.ok(begin.members.includes(j.volunteerId!) && begin.members.length <= 4, JSON.stringify(begin.members));
    for (const s of [...sims, j]) assert.deepEqual(s.errors, []);
  } finally {
    for (const s of sims) s.close();
    joiner?.close();
    await server.stopJobs();
  }
});

test('a Moshpit joiner sent an older checkpoint makes the next sync leave a new one, so later joiners load a fresher model', async (t) => {
  // checkpointEvery far off: only joiners ask for checkpoints. Before, a joiner was sent the newest
  // checkpoint at once, so none waited for one and every later joiner loaded the same ever older model.
  // Its own server, timed on a fake clock: nothing here waits on a server timer, and the load deadline
  // (4× the median load + 5 s, the loads here take milliseconds) evicted a joiner whose load took
  // longer in a fresh clone's suite beside a CPU-bound process.
  const server = await startTestServer({ clock: new FakeClock(Date.now()) });
  t.after(() => server.stop());
  const job = await server.createJob({ minWorkers: 8, maxWorkers: 11, trust: 'trusted', groupSize: 4, H: 1, targetSteps: 100_000, checkpointEvery: 100_000 });
  const sims = Array.from({ length: 8 }, () => new SimVolunteer({ url: server.url, oracle: server.oracle }));
  const joiners: SimVolunteer[] = [];
  const seqNow = () => Math.max(...sims.map((s) => s.committed.length));
  /** A joiner after `syncs` more syncs: the sync of the checkpoint it was sent, and the job's sync then. */
  const join = async (syncs: number) => {
    const from = seqNow();
    await waitFor(`${syncs} more syncs`, () => seqNow() >= from + syncs, 30_000);
    const j = new SimVolunteer({ url: server.url, oracle: server.oracle });
    joiners.push(j);
    await j.connected();
    assert.equal((await j.request(job.id)).ok, true);
    const load = await waitFor('the joiner is sent a model', () => j.events.find((e) => e.name === 'model:load')?.payload as { seq: number } | undefined, 30_000);
    const at = seqNow();
    await waitFor('the joiner commits a group round', () => j.committed.length >= 1, 60_000).catch((e: Error) => {
      throw new Error(`${e.message}\nthe joiner's events: ${j.events.map((x) => x.name).join(', ')}; its errors: ${j.errors.join('; ')}\n${server.logTail(40)}`);
    });
    return { loaded: load.seq, at };
  };
  try {
    for (const s of sims) await s.connected();
    for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
    const first = await join(3);
    const second = await join(3);
    assert.ok(second.loaded < second.at, `the second joiner was sent an older checkpoint (sync ${second.loaded}, the job at ${second.at})`);
    const third = await join(3);
    assert.ok(third.loaded > second.loaded, `the third joiner loaded sync ${third.loaded}'s checkpoint, the second ${second.loaded}'s (first ${first.loaded})`);
    for (const s of [...sims, ...joiners]) assert.deepEqual(s.errors, []);
  } finally {
    for (const s of [...sims, ...joiners]) s.close();
    await server.stopJobs();
  }
});

test('a Moshpit joiner the next sync needs loads the seed when no checkpoint exists yet, instead of waiting for one forever', async () => {
  // Five members, a minimum of five; one joins while sync 1 runs, and one member leaves in it. The
  // joiner waits for the next sync's checkpoint (none stored yet), and the next sync waits for a
  // fifth member: before, nothing happened again (an e2e job, six runtimes beside a busy browser,
  // sat 200 s with no log line once a member's socket timed out). Now it loads the seed.
  const job = await server.createJob({ minWorkers: 5, maxWorkers: 6, trust: 'trusted', groupSize: 3, H: 1, targetSteps: 100_000, checkpointEvery: 100_000 });
  const sims = Array.from({ length: 5 }, () => new SimVolunteer({ url: server.url, oracle: server.oracle }));
  const joiner = new SimVolunteer({ url: server.url, oracle: server.oracle });
  try {
    for (const s of sims) (await s.connected(), (s.holdRounds = true));
    for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
    await waitFor('sync 1 begins', () => sims.every((s) => s.events.some((e) => e.name === 'round:begin')), 10_000);
    await joiner.connected();
    assert.equal((await joiner.request(job.id)).ok, true);
    const [leaver, ...stayers] = sims;
    leaver.close();
    for (const s of stayers) (s.holdRounds = false, s.releaseRound());
    const load = await waitFor('the joiner is sent a model', () => joiner.events.find((e) => e.name === 'model:load')?.payload as { seq: number; url: string | null } | undefined, 30_000)
      .catch((e: Error) => { throw new Error(`${e.message}\n${server.logTail(40)}`); });
    assert.deepEqual([load.seq, load.url], [0, null], 'the seed');
    await waitFor('the joiner commits a group round', () => joiner.committed.length >= 1, 30_000);
    for (const s of [...stayers, joiner]) assert.deepEqual(s.errors, []);
  } finally {
    for (const s of [...sims, joiner]) s.close();
    await server.stopJobs();
  }
});
