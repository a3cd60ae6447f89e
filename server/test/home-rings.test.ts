// Hierarchical ring rounds through the real server and Socket.IO: five simulated volunteers from three
// loopback addresses (two homes of two, one alone), on a server that tells addresses apart. A trusted
// ring job's round:begin names the homes (each led by its first member, `members` home by home), and
// its syncs commit; `homeRings: false`, an untrusted job, or a server with --network-prefix off keep
// flat rounds.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { RoundBegin } from '@tabfleet/protocol';
import { SimVolunteer, startTestServer, waitFor, type TestServer } from '../src/testing';

// Joined in this order, so the flat ring interleaves the homes (and no address is a majority as an untrusted job fills).
const ADDRESSES = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.2', '127.0.0.3'];

let server: TestServer;
let flatServer: TestServer;
before(async () => {
  server = await startTestServer({ networkRules: { v4: 32, v6: 128 } });
  flatServer = await startTestServer();
});
after(async () => {
  await server.stop();
  await flatServer.stop();
});

/** Runs a job with the five volunteers to `syncs` commits and returns each sync's round:begin as every member saw it. */
async function rounds(on: TestServer, spec: Parameters<TestServer['createJob']>[0], syncs: number): Promise<{ sims: SimVolunteer[]; begins: RoundBegin[][] }> {
  const job = await on.createJob({ minWorkers: 5, maxWorkers: 5, ...spec });
  const sims = ADDRESSES.map((localAddress) => new SimVolunteer({ url: on.url, oracle: on.oracle, localAddress }));
  try {
    for (const s of sims) await s.connected();
    for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
    await waitFor(`${syncs} syncs`, () => sims.every((s) => s.committed.length >= syncs), 60_000);
    const begins = Array.from({ length: syncs }, (_, k) => sims.map((s) => s.events.find((e) => e.name === 'round:begin' && (e.payload as RoundBegin).seq === k + 1)!.payload as RoundBegin));
    for (const s of sims) assert.deepEqual(s.errors, []);
    return { sims, begins };
  } finally {
    for (const s of sims) s.close();
    await on.stopJobs();
  }
}

test('a trusted ring job goes by homes: round:begin names them, led by their first member, and its syncs commit', async () => {
  const { sims, begins } = await rounds(server, { trust: 'trusted' }, 3);
  const home = (i: number) => ADDRESSES.filter((a) => a === ADDRESSES[i]).length;
  for (const [k, seen] of begins.entries()) {
    const b = seen[0];
    assert.equal(b.mode, 'ring');
    for (const other of seen) assert.deepEqual(other.homes, b.homes, `sync ${k + 1}: members were told different homes`);
    assert.ok(b.homes, `sync ${k + 1}: no homes in round:begin`);
    assert.deepEqual(b.members, b.homes.flat(), 'members are listed home by home');
    assert.equal(b.homes.length, 3, `sync ${k + 1}: homes ${JSON.stringify(b.homes)}`);
    for (const [i, s] of sims.entries()) {
      const h: string[] = b.homes.find((x) => x.includes(s.volunteerId))!;
      assert.equal(h.length, home(i), `${ADDRESSES[i]}: home ${h.join('+')}`);
      for (const id of h) assert.equal(ADDRESSES[sims.findIndex((x) => x.volunteerId === id)], ADDRESSES[i], 'a home spans two addresses');
    }
  }
});

test('homeRings: false, an untrusted job, and a server that does not tell addresses apart keep flat rounds', async () => {
  const off = await rounds(server, { trust: 'trusted', homeRings: false }, 2);
  const untrusted = await rounds(server, { trust: 'untrusted' }, 2);
  const sameMachine = await rounds(flatServer, { trust: 'trusted' }, 2);
  for (const [what, r] of Object.entries({ off, untrusted, sameMachine })) {
    for (const seen of r.begins) for (const b of seen) assert.equal(b.homes, undefined, `${what}: homes ${JSON.stringify(b.homes)}`);
  }
  assert.equal(untrusted.begins[0][0].mode, 'group');
});

test('signals in a round by homes: inside a home and between neighbouring leaders, not from a member to another home', async () => {
  const job = await server.createJob({ minWorkers: 5, maxWorkers: 5, trust: 'trusted' });
  const sims = ADDRESSES.map((localAddress) => new SimVolunteer({ url: server.url, oracle: server.oracle, localAddress }));
  try {
    for (const s of sims) await s.connected();
    for (const s of sims) s.holdRounds = true;
    for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
    const begin = await waitFor('round:begin', () => sims[0].events.find((e) => e.name === 'round:begin')?.payload as RoundBegin | undefined);
    const byId = new Map(sims.map((s) => [s.volunteerId, s]));
    const [[a1, a2], [b1, b2], [c1]] = begin.homes!.map((h) => h.map((id) => byId.get(id)!));
    const signal = (from: SimVolunteer, to: SimVolunteer) => from.emit('signal', { jobId: job.id, roundId: begin.roundId, to: to.volunteerId, data: { type: 'offer', sdp: 'v=0' } });
    // Leaders a1, b1, c1 form a ring of three; a2 and b2 link only inside their homes.
    for (const [from, to] of [[a1, a2], [a2, a1], [a1, b1], [b1, c1], [c1, a1], [b2, b1]]) assert.deepEqual(await signal(from, to), { ok: true });
    for (const [from, to] of [[a2, b1], [a2, b2], [b2, c1], [c1, b2]]) {
      const refused = await signal(from, to);
      assert.equal(refused.ok, false);
      assert.equal(!refused.ok && refused.error.code, 'not_neighbour');
    }
    for (const s of sims) assert.deepEqual(s.errors, []);
  } finally {
    for (const s of sims) s.close();
    await server.stopJobs();
  }
});
