// Must show (issue 36): a tab behind a firewall that drops UDP reaches its ring through TURN over TCP.
// Three volunteer tabs, each its own headless Chromium in its own home of the network lab: one behind an
// endpoint-independent NAT whose router drops all outgoing UDP, one behind a symmetric NAT, one behind
// an endpoint-independent NAT; in a ring of three the blocked tab links to both. The server hands out
// `turn:…?transport=udp` and `turn:…?transport=tcp` with one set of credentials; ring syncs commit with
// no star round, and coturn's log shows the blocked tab's allocation, made over TCP since its router
// dropped every UDP packet it sent; what Chromium's getStats() said of the blocked tab's links, as the
// server keeps it, is a relay over TCP for both. Before coturn refused the lab's LAN addresses as
// peers, such a link opened and died within 2 s (see server/src/testing/coturn.ts).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { WorkerRow } from '@tabfleet/protocol';
import { waitFor } from '@tabfleet/server/testing';
import { startLabCluster, type LabCluster } from './lab-cluster';
import { committedRounds, roundsOf, RING_JOB, tabLog } from './lab-jobs';

let cluster: LabCluster;
before(async () => {
  cluster = await startLabCluster({ homes: [{ nat: 'eim', blockUdp: true }, { nat: 'symmetric' }, { nat: 'eim' }], turnTransports: ['udp', 'tcp'] });
});
after(() => cluster?.close());

test('a tab behind a UDP-blocking firewall commits ring syncs through TURN over TCP, no star', { timeout: 12 * 60_000 }, async () => {
  const { server, coturn, homes } = cluster;
  const job = await server.createJob({ ...RING_JOB, minWorkers: 3, maxWorkers: 3 });
  const [blocked] = await cluster.openTabs(tabLog);
  const why = async () => `rounds: ${JSON.stringify(await roundsOf(server, job.id))}\nserver log:\n${server.logTail()}\ncoturn log:\n${coturn!.log().slice(-3000)}`;
  await waitFor('two ring syncs commit', async () => (await committedRounds(server, job.id, 'ring')) >= 2, 8 * 60_000, 1000)
    .catch(async (e: Error) => assert.fail(`${e.message}\n${await why()}`));
  assert.deepEqual((await roundsOf(server, job.id)).filter((r) => r.mode === 'star'), [], 'no star round');
  assert.ok(await homes[0].counter('udp_blocked') > 0, 'the firewall dropped the tab\'s UDP');
  const id = await blocked.volunteerId();
  assert.ok(id, 'the blocked tab has a volunteer id');
  assert.match(coturn!.log(), new RegExp(`tcp or tls connected to: ${homes[0].wanAddress.replace(/\./g, '\\.')}:\\d+`), await why());
  assert.match(coturn!.log(), new RegExp(`user <\\d+:${id}>: incoming packet ALLOCATE processed, success`), await why());
  const links = async () => ((await server.api(`/api/jobs/${job.id}`)).body.workers as WorkerRow[]).find((w) => w.volunteerId === id)?.links;
  const reported = await waitFor('the blocked tab reports its links to both neighbours', async () => {
    const l = await links();
    return l?.length === 2 ? l : null;
  }, 60_000, 250);
  for (const link of reported) assert.deepEqual({ local: link.local, relayProtocol: link.relayProtocol }, { local: 'relay', relayProtocol: 'tcp' }, JSON.stringify(reported));
  assert.deepEqual(blocked.errors, []);
});
