// Two homes cannot reach each other's LAN addresses: no route on the internet segment leads to a LAN,
// and a router drops what arrives on its WAN unasked, even when the sender routes it straight
// at the router's WAN address. What a peer link between homes must get through with STUN or TURN.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { NetLab, type Home, type LabHost } from './index';
import { askProbe, spawnProbe, startProbe, waitFor, type ProbeServer } from './testing/index';

let lab: NetLab;
let home1: Home;
let home2: Home;
let tab1: LabHost;
let tab2: LabHost;
let server2: ProbeServer;

before(async () => {
  lab = await NetLab.create();
  home1 = await lab.home('h1', { nat: 'eim' });
  home2 = await lab.home('h2', { nat: 'eim' });
  tab1 = await home1.host('tab1');
  tab2 = await home2.host('tab1');
  server2 = await startProbe(lab, tab2, ['tcp-echo', '9000']);
});

after(() => lab?.close());

test("the homes' LANs do not overlap", () => {
  assert.notEqual(home1.lanSubnet, home2.lanSubnet);
  assert.notEqual(tab1.address, tab2.address);
});

test("a host cannot reach another home's LAN address: its router has no route there", async () => {
  const answer = await askProbe(lab, tab1, ['tcp-ask', `${tab2.address}:9000`]);
  assert.equal(answer.error, 'ENETUNREACH', JSON.stringify(answer));
  assert.deepEqual(server2.lines.filter((l) => 'tcp' in l), []);
});

test("routed straight at the other home's router, the connection is dropped there unasked", async () => {
  // As a neighbour on the segment could: route home 2's LAN via its router's WAN address.
  await lab.exec(home1, ['ip', 'route', 'add', home2.lanSubnet, 'via', home2.wanAddress]);
  const before = await home2.counter('wan_unsolicited');
  const client = spawnProbe(lab, tab1, ['tcp-ask', `${tab2.address}:9000`]);
  let answered = '';
  client.stdout!.on('data', (d) => (answered += d));
  await waitFor(async () => (await home2.counter('wan_unsolicited')) > before);
  client.kill();
  assert.equal(answered, '', 'the connection got an answer');
  assert.deepEqual(server2.lines.filter((l) => 'tcp' in l), [], "a host in home 2 was reached from home 1's LAN");
});

test('lab namespaces are IPv4 only: no IPv6 address appears (and then changes) under a browser', async () => {
  for (const target of [tab1, home1, lab.internet]) {
    const { stdout } = await lab.exec(target, ['ip', '-6', 'addr', 'show']);
    assert.equal(stdout.trim(), '', `${typeof target === 'string' ? target : target.ns}: ${stdout}`);
  }
});
