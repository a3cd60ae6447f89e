// A member left out of a sync (not ready at the pace-derived bound) that stays silent is evicted at
// the barrier timeout even when the others cannot sync without it. Before, only a sync's begin or
// commit looked for silent members; with the job at its minimum neither came, and the job stalled for
// ever with the silent member on its worker table (the slow-evaluator flake: its round:ready had been
// refused for rate). Real time: the eviction is bounded below by the barrier timeout, above by 30 s.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

const BARRIER_MS = 3_000;
let server: TestServer;
before(async () => {
  // A short floor, so the pace-derived bound (members left out) comes well before the barrier timeout (evicted).
  server = await startTestServer({ timing: { roundTimeoutMs: 10_000, barrierTimeoutMs: BARRIER_MS, loadTimeoutMs: 10_000, deadlineFloorMs: 300 } });
});
after(() => server.stop());

test('a left-out member that stays silent is evicted at the barrier timeout when the job cannot sync without it', async () => {
  const sims = [await server.volunteer(), await server.volunteer(), await server.volunteer()];
  const job = await server.createJob({ minWorkers: 3, maxWorkers: 3, H: 1, pacing: 'fixed', targetSteps: 100_000 });
  for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
  await waitFor('the pace is set', () => sims[0].committed.length >= 5);
  const silent = sims[2];
  silent.holdReady = true;
  // The server counts from the commit that handed it work, which follows its last round:ready; that
  // commit may still be on its way here, so the time it was held is not a lower bound (a CI flake).
  const lastReadyAt = silent.lastReadyAt;
  assert.ok(lastReadyAt !== null, 'it has reported ready before');
  await waitFor('it is left out', () => /is left out of sync/.test(server.logTail(50)), 30_000);
  const reason = await waitFor('the silent member is evicted', () => silent.ended, 30_000);
  assert.match(reason, /not ready for \d+ s/);
  assert.ok(Date.now() - lastReadyAt >= BARRIER_MS, 'not before the barrier timeout');
  const after = (await server.api(`/api/jobs/${job.id}`)).body.job;
  assert.equal(after.workers, 2, 'off the worker table');
  assert.ok(sims.slice(0, 2).every((s) => !s.ended), 'the others stay, waiting for a third');
});
