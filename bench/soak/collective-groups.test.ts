// An untrusted job's checked Moshpit groups through the collective: 24 simulated volunteers on a real
// test server, in groups of 8 the server draws every sync, each group a `Group` average of the
// collective (per-part owners, screening, CenteredClip, digests, `Group.validate` for validators) over
// the in-memory network, as tabs run it over WebRTC. One volunteer scales its values by 1e6: its
// group's owners refuse it, the server removes it, and every group goes on committing.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { checksumOf, type RoundBegin } from '@tabfleet/protocol';
import { startTestServer, waitFor, type SimVolunteer, type TestServer } from '@tabfleet/server/testing';
import { CollectiveExchanger } from './collective-exchanger';

let server: TestServer;
after(() => server?.stop());

test('24 volunteers in checked groups of 8 average through the collective\'s Group; a 1e6-scaling member is refused by its owners and removed', async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 30_000, barrierTimeoutMs: 30_000, loadTimeoutMs: 30_000 } });
  const exchanger = new CollectiveExchanger({ seed: 11 });
  const job = await server.createJob({ preset: 'mlp-fashion', H: 1, groupSize: 8, minWorkers: 23, maxWorkers: 24, targetSteps: 1_000_000, evalEverySteps: 1_000_000 });
  const sims: SimVolunteer[] = [];
  for (let i = 0; i < 23; i++) sims.push(await server.volunteer({ exchanger, trainMs: 2, appliedKept: 8 }));
  const attacker = await server.volunteer({ exchanger, trainMs: 2, contribution: (p) => p.map((v) => v * 1e6) });
  for (const s of [...sims, attacker]) assert.equal((await s.request(job.id)).ok, true);
  const commits: { id: string; roundId: number }[] = [];
  for (const s of sims) s.socket.on('round:commit', (c: { roundId: number }) => commits.push({ id: s.volunteerId, roundId: c.roundId }));

  await waitFor(`the attacker removed\n${server.logTail(20)}`, () => attacker.events.some((e) => e.name === 'job:end'), 60_000, 50);
  const reason = (attacker.events.find((e) => e.name === 'job:end')!.payload as { reason: string }).reason;
  assert.match(reason, /refused by most owners/);
  const from = Math.max(...sims.map((s) => s.committed.at(-1) ?? 0));
  await waitFor(`every honest volunteer 3 syncs on\n${server.logTail(20)}`, () => sims.every((s) => s.committed.includes(from + 3)), 60_000, 50);

  for (let seq = from + 1; seq <= from + 3; seq++) {
    const groups = new Map<number, string[]>();
    for (const s of sims) {
      const b = s.events.find((e) => e.name === 'round:begin' && (e.payload as RoundBegin).seq === seq)!.payload as RoundBegin;
      assert.ok(b.mode === 'group' && b.grouped && b.members.length <= 8, JSON.stringify(b));
      groups.set(b.roundId, b.members);
    }
    assert.equal(groups.size, 3, `sync ${seq}: 23 members in 3 groups`);
    for (const g of groups.values()) {
      const held = sims.filter((s) => g.includes(s.volunteerId)).map((s) => s.applied.get(seq)!);
      assert.equal(new Set(held.map((p) => checksumOf(p))).size, 1, `sync ${seq}: a group's members hold one model`);
    }
  }
  assert.ok(commits.length > 0 && commits.every((c) => exchanger.completed(c.id, c.roundId)), 'every commit came from a completed collective op');
  assert.ok(exchanger.counters.validations > 0, 'validators recomputed parts through Group.validate');
  for (const s of sims) for (const p of s.applied.values()) assert.ok(p.every((v) => Number.isFinite(v) && Math.abs(v) < 10), 'a parameter left the honest range');
  for (const s of sims) assert.deepEqual(s.errors, []);
  await server.stopJobs();
});
