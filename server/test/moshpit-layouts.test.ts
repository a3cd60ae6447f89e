// Moshpit layouts through the real server and Socket.IO. Hierarchical: six simulated volunteers connect from
// four loopback addresses (two pairs share one), and in a job with `hierarchical: true` each pair is
// in one group, side by side in its ring, every sync, while the groups still change between syncs.
// Regional: eight volunteers hint two regions, and with `regionalGroups: true` the grid's low axis
// averages inside a region, its high axis across.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { RoundBegin } from '@tabfleet/protocol';
import { SIM_CAPABILITIES, SimVolunteer, startTestServer, waitFor, type TestServer } from '../src/testing';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

test('tabs behind one address are in one group, ring neighbours, every sync of a hierarchical Moshpit job', async () => {
  const job = await server.createJob({ minWorkers: 6, maxWorkers: 6, trust: 'trusted', groupSize: 2, hierarchical: true });
  const addresses = ['127.0.0.2', '127.0.0.3', '127.0.0.2', '127.0.0.4', '127.0.0.3', '127.0.0.5'];
  const sims = addresses.map((localAddress) => new SimVolunteer({ url: server.url, oracle: server.oracle, localAddress }));
  try {
    for (const s of sims) await s.connected();
    for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
    await waitFor('4 syncs', () => sims.every((s) => s.committed.length >= 4), 30_000);
    const memberships: string[] = [];
    for (const seq of [1, 2, 3, 4]) {
      const groups = new Map<number, string[]>();
      for (const s of sims) {
        const begin = s.events.find((e) => e.name === 'round:begin' && (e.payload as RoundBegin).seq === seq)!.payload as RoundBegin;
        groups.set(begin.roundId, begin.members);
      }
      for (const [x, y] of [[0, 2], [1, 4]]) {
        const [idX, idY] = [sims[x].volunteerId, sims[y].volunteerId];
        const g = [...groups.values()].find((m) => m.includes(idX))!;
        assert.ok(g.includes(idY), `sync ${seq}: two tabs of ${addresses[x]} in different groups`);
        assert.equal(Math.abs(g.indexOf(idX) - g.indexOf(idY)), 1, `sync ${seq}: not ring neighbours in ${g.join(' ')}`);
      }
      memberships.push([...groups.values()].map((g) => [...g].sort().join('+')).sort().join(' | '));
    }
    // Four grid points (two households, two single tabs) in groups of two points: the groups change.
    assert.ok(new Set(memberships).size >= 2, `the same groups every sync: ${memberships[0]}`);
    for (const s of sims) assert.deepEqual(s.errors, []);
  } finally {
    for (const s of sims) s.close();
    await server.stopJobs();
  }
});

test('regional Moshpit groups: volunteers hinting two regions average inside their region along the grid\'s low axis, across along the high one', async () => {
  const job = await server.createJob({ minWorkers: 8, maxWorkers: 8, trust: 'trusted', groupSize: 4, regionalGroups: true });
  const regions = ['Europe', 'America', 'Europe', 'America', 'Europe', 'America', 'Europe', 'America'];
  const sims = regions.map((region) => new SimVolunteer({ url: server.url, oracle: server.oracle, capabilities: { ...SIM_CAPABILITIES, region } }));
  try {
    for (const s of sims) await s.connected();
    for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
    await waitFor('4 syncs', () => sims.every((s) => s.committed.length >= 4), 30_000);
    const regionOf = new Map(sims.map((s, i) => [s.volunteerId, regions[i]]));
    for (const seq of [1, 2, 3, 4]) {
      const groups = new Map<number, string[]>();
      for (const s of sims) {
        const begin = s.events.find((e) => e.name === 'round:begin' && (e.payload as RoundBegin).seq === seq)!.payload as RoundBegin;
        groups.set(begin.roundId, begin.members);
      }
      // A 4 × 2 grid: odd syncs average along the axis of 4 (inside a region), even ones along the axis of 2 (one of each).
      const spans = [...groups.values()].map((g) => new Set(g.map((id) => regionOf.get(id))).size);
      assert.deepEqual(spans, seq % 2 ? [1, 1] : [2, 2, 2, 2], `sync ${seq}: regions per group`);
    }
    for (const s of sims) assert.deepEqual(s.errors, []);
  } finally {
    for (const s of sims) s.close();
    await server.stopJobs();
  }
});
