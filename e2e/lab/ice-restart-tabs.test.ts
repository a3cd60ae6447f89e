// ICE restart in Chromium: two tabs, each its own headless Chromium in a host behind its own
// endpoint-independent NAT in the network lab, link up through coturn (STUN/TURN) as ring members of
// the collective test page (lab-collective-tabs.ts). One router then drops everything it forwards
// until both tabs see their link down and a restart tried; once it forwards again the link comes
// back at both, and an allreduce over it is exact. Needs root.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { NetLab, type Home } from '@tabfleet/netlab';
import { LAB_HOME_LANS, startCoturn, turnCredentials, waitFor, type Coturn } from '@tabfleet/server/testing';
import { openLabCollectiveTabs, type LabCollectiveTabs } from './lab-collective-tabs';

const SECRET = 'ice-restart-tabs-secret-0123456789';
let lab: NetLab;
let coturn: Coturn;
let homes: Home[];
let tabs: LabCollectiveTabs;

before(async () => {
  lab = await NetLab.create();
  const turnHost = await lab.publicHost('turn');
  coturn = await startCoturn(SECRET, { listenIp: turnHost.address, port: 3478, deniedPeerRanges: [LAB_HOME_LANS], spawn: (argv) => lab.spawn(turnHost, argv) });
  homes = [await lab.home('a', { nat: 'eim' }), await lab.home('b', { nat: 'eim' })];
  const hosts = [await homes[0].host('t1'), await homes[1].host('t1')];
  const expiry = Math.floor(Date.now() / 1000) + 3600;
  tabs = await openLabCollectiveTabs(lab, hosts, (id) => ({
    jobId: 'ice-restart', round: 1, deadlineMs: 240_000, iceRestartBoundMs: 240_000,
    iceServers: [{ urls: [coturn.stunUrl, coturn.url], ...turnCredentials(SECRET, id, expiry) }],
  }));
});
after(async () => {
  await tabs?.close();
  coturn?.stop();
  await lab?.close();
});

const allreduce = () => Promise.all(tabs.pages.map((p) => p.evaluate(() => window.tabfleetCollective.allreduceCheck({ len: 65_536, seed: 3, dtype: 'f32', op: 'sum', range: 1000 }))));
const links = () => Promise.all(tabs.pages.map((p) => p.evaluate(() => Object.values(window.tabfleetCollective.iceRestarts())[0])));

test('a tab\'s link that went down comes back through an ICE restart, and carries an exact allreduce', { timeout: 8 * 60_000 }, async () => {
  await Promise.all(tabs.pages.map((p) => p.evaluate(() => window.tabfleetCollective.connect())));
  for (const r of await allreduce()) assert.equal(r.mismatches, 0);
  await lab.exec(homes[0], ['nft', '-f', '-'], { input: 'table ip outage {\n chain hold {\n  type filter hook forward priority -10; policy drop;\n }\n}\n' });
  await waitFor('both tabs see the link down and a restart tried', async () => (await links()).every((l) => l?.down && l.restarts >= 1), 180_000, 250)
    .catch(async (e: Error) => assert.fail(`${e.message}: ${JSON.stringify(await links())}`));
  await lab.exec(homes[0], ['nft', 'delete', 'table', 'ip', 'outage']);
  await waitFor('the link is back at both tabs', async () => (await links()).every((l) => l && !l.down && l.recoveries >= 1), 180_000, 250)
    .catch(async (e: Error) => assert.fail(`${e.message}: ${JSON.stringify(await links())}`));
  for (const r of await allreduce()) assert.equal(r.mismatches, 0);
  const stats = await Promise.all(tabs.pages.map((p) => p.evaluate(() => window.tabfleetCollective.stats())));
  for (const s of stats) assert.ok(s.links.every((l) => l.open), JSON.stringify(s.links));
  assert.deepEqual(tabs.errors, []);
});
