// The worker table of an untrusted Moshpit job (GET /api/jobs/:id and the dashboard's job:workers)
// says each member's group at the last sync it committed with, and for a member removed for a fault,
// why: real server, Socket.IO, simulated volunteers from their own loopback addresses.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { WorkerRow } from '@tabfleet/protocol';
import { waitFor, type SimVolunteer } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer({
    networkRules: { v4: 32, v6: 128 }, addressLimits: { connections: 100, jobShare: 0.5 },
    timing: { roundTimeoutMs: 30_000, barrierTimeoutMs: 30_000, loadTimeoutMs: 30_000 },
  });
});
after(() => server.stop());

test('rows carry each member\'s group of the last sync, and the removed member\'s fault and why it left', async () => {
  const job = await server.createJob({ minWorkers: 7, maxWorkers: 8, H: 1, groupSize: 4, targetSteps: 1000, checkpointEvery: 1000 });
  const honest: SimVolunteer[] = [];
  for (let i = 0; i < 7; i++) honest.push(await server.volunteer({ localAddress: `127.0.0.${10 + i}` }));
  const attacker = await server.volunteer({ localAddress: '127.0.0.200', contribution: (p) => p.map((v) => v * 1e6) });
  for (const s of [...honest, attacker]) assert.equal((await s.request(job.id)).ok, true);
  const rows = async () => (await server.api(`/api/jobs/${job.id}`)).body.workers as WorkerRow[];
  await waitFor('the attacker is removed and the honest have committed 2 syncs', async () => {
    const r = await rows();
    return r.find((w) => w.volunteerId === attacker.volunteerId)?.state === 'left' && honest.every((s) => s.committed.length >= 2);
  }, 120_000, 100).catch((e) => { throw new Error(`${e.message}\n${server.logTail(60)}`); });

  const table = await rows();
  const gone = table.find((w) => w.volunteerId === attacker.volunteerId)!;
  assert.equal(gone.faults, 1);
  assert.match(gone.lastFault ?? '', /^its contributions to round \d+ were refused by most owners \(.*norm/);
  assert.equal(gone.leftReason, gone.lastFault, 'it left because it was removed');
  const members = table.filter((w) => w.state !== 'left');
  assert.equal(members.length, 7);
  for (const w of members) {
    assert.equal(w.faults, 0);
    assert.equal(w.lastFault, null);
    assert.equal(w.leftReason, null);
    assert.ok(w.group && w.group.seq >= 1 && w.group.index < w.group.of && w.group.of <= 2, JSON.stringify(w.group));
  }
  // Those that committed the latest sync: in groups of at most 4, as the server drew them.
  const latest = Math.max(...members.map((w) => w.group!.seq));
  const sizes = new Map<number, number>();
  for (const w of members.filter((x) => x.group!.seq === latest)) sizes.set(w.group!.index, (sizes.get(w.group!.index) ?? 0) + 1);
  assert.ok([...sizes.values()].every((n) => n >= 3 && n <= 4), JSON.stringify([...sizes]));
  await server.stopJobs();
  for (const s of honest) assert.deepEqual(s.errors, []);
});
