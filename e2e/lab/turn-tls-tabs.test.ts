// TURN over TLS (`turns:`) from tabs whose firewall drops UDP: two Chromium tabs, each in a home
// behind an endpoint-independent NAT that drops all outgoing UDP, given only coturn's `turns:` URL
// (a certificate for coturn's lab address from a test CA). Tabs that trust the CA through an NSS
// database in their HOME (as a user's browser would; nothing like --ignore-certificate-errors) open a
// link relayed over TLS and allreduce exactly over it; tabs that do not trust it get no relay and no
// link. Collective test page, one Chromium per tab (lab-collective-tabs.ts). Needs root.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { NetLab, type LabHost } from '@tabfleet/netlab';
import { LAB_HOME_LANS, makeTestCa, startCoturn, turnCredentials, type Coturn, type TestCa } from '@tabfleet/server/testing';
import { openLabCollectiveTabs, type LabCollectiveTabs } from './lab-collective-tabs';

const SECRET = 'turn-tls-tabs-secret-0123456789';
let lab: NetLab;
let ca: TestCa;
let coturn: Coturn;
let hosts: LabHost[];
const homesDirs: string[] = [];
const opened: LabCollectiveTabs[] = [];

/** A HOME whose NSS database (where Chromium on Linux reads the user's trust) trusts the test CA, or nothing. */
async function browserHome(trustCa: boolean): Promise<string> {
  const home = mkdtempSync(join(tmpdir(), 'tabfleet-turn-tls-home-'));
  homesDirs.push(home);
  const nssdb = join(home, '.pki/nssdb');
  mkdirSync(nssdb, { recursive: true });
  await promisify(execFile)('/usr/bin/certutil', ['-N', '-d', `sql:${nssdb}`, '--empty-password']);
  if (trustCa) await promisify(execFile)('/usr/bin/certutil', ['-A', '-d', `sql:${nssdb}`, '-n', 'tabfleet test CA', '-t', 'C,,', '-i', ca.caPath]);
  return home;
}

before(async () => {
  lab = await NetLab.create();
  ca = await makeTestCa();
  const turnHost = await lab.publicHost('turn');
  const cert = await ca.issue({ ip: [turnHost.address] });
  coturn = await startCoturn(SECRET, {
    listenIp: turnHost.address, port: 3478, tls: { cert: cert.certPath, key: cert.keyPath, port: 5349 }, deniedPeerRanges: [LAB_HOME_LANS], spawn: (argv) => lab.spawn(turnHost, argv),
  });
  hosts = [];
  for (const name of ['a', 'b']) hosts.push(await (await lab.home(name, { nat: 'eim', blockUdp: true })).host('t1'));
});
after(async () => {
  for (const t of opened) await t.close();
  coturn?.stop();
  await lab?.close();
  ca?.remove();
  for (const h of homesDirs) rmSync(h, { recursive: true, force: true });
});

async function tabsTrusting(trustCa: boolean, jobId: string): Promise<LabCollectiveTabs> {
  const expiry = Math.floor(Date.now() / 1000) + 3600;
  const tabs = await openLabCollectiveTabs(lab, hosts, (id) => ({
    jobId, round: 1, deadlineMs: 240_000, iceServers: [{ urls: [coturn.tlsUrl!], ...turnCredentials(SECRET, `${jobId}-${id}`, expiry) }],
  }), { env: { ...process.env, HOME: await browserHome(trustCa) } });
  opened.push(tabs);
  return tabs;
}

test('tabs that trust the CA link through TURN over TLS and allreduce exactly over it', { timeout: 6 * 60_000 }, async () => {
  const tabs = await tabsTrusting(true, 'tls');
  try {
    await Promise.all(tabs.pages.map((p) => p.evaluate(() => window.tabfleetCollective.connect())));
    const rs = await Promise.all(tabs.pages.map((p) => p.evaluate(() => window.tabfleetCollective.allreduceCheck({ len: 65_536, seed: 5, dtype: 'f32', op: 'sum', range: 1000 }))));
    for (const r of rs) assert.equal(r.mismatches, 0);
    const paths = await Promise.all(tabs.pages.map((p) => p.evaluate(() => window.tabfleetCollective.linkPaths())));
    for (const p of paths) {
      assert.equal(p.length, 1, JSON.stringify(paths));
      assert.deepEqual([p[0].local, p[0].relayProtocol], ['relay', 'tls'], JSON.stringify(paths));
    }
    assert.match(coturn.log(), /user <\d+:tls-tab0>: incoming packet ALLOCATE processed, success/);
    assert.deepEqual(tabs.errors, []);
  } finally {
    await tabs.close();
  }
});

test('tabs that do not trust the CA get no TLS relay, so no link', { timeout: 6 * 60_000 }, async () => {
  const tabs = await tabsTrusting(false, 'untrusted');
  try {
    const results = await Promise.all(tabs.pages.map((p) => p.evaluate(() => window.tabfleetCollective.connect().then(() => 'open', (e: Error) => e.message))));
    for (const r of results) assert.match(r, /not open within|no connection within|lost/, JSON.stringify(results));
    assert.doesNotMatch(coturn.log(), /user <\d+:untrusted-tab\d>: incoming packet ALLOCATE processed, success/);
  } finally {
    await tabs.close();
  }
});
