// A host behind either kind of NAT reaches a public host over TCP and UDP, and the public host sees the
// router's WAN address, never the host's LAN address.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { NetLab, type Home, type LabHost } from './index';
import { addressOf, askProbe, startProbe, type ProbeServer } from './testing/index';

let lab: NetLab;
let server: LabHost;
let udp: ProbeServer;
let tcp: ProbeServer;
const homes: Array<{ home: Home; tab: LabHost }> = [];

before(async () => {
  lab = await NetLab.create();
  server = await lab.publicHost('server');
  udp = await startProbe(lab, server, ['udp-echo', '3478']);
  tcp = await startProbe(lab, server, ['tcp-echo', '8080']);
  for (const nat of ['eim', 'symmetric'] as const) {
    const home = await lab.home(nat === 'eim' ? 'h1' : 'h2', { nat });
    homes.push({ home, tab: await home.host('tab1') });
  }
});

after(() => lab?.close());

test('the lab gives documentation addresses only', () => {
  assert.match(server.address, /^203\.0\.113\.\d+$/);
  for (const { home, tab } of homes) {
    assert.match(home.wanAddress, /^198\.51\.100\.\d+$/);
    assert.match(tab.address, /^192\.0\.2\.\d+$/);
  }
});

for (const nat of ['eim', 'symmetric'] as const) {
  test(`a host behind ${nat} NAT reaches a public host over TCP, which sees the router's WAN address`, async () => {
    const { home, tab } = homes.find((h) => h.home.options.nat === nat)!;
    const answer = await askProbe(lab, tab, ['tcp-ask', `${server.address}:8080`]);
    assert.equal(addressOf(answer.seen), home.wanAddress, JSON.stringify(answer));
    assert.ok(tcp.lines.some((l) => addressOf(l.tcp) === home.wanAddress));
    assert.ok(!tcp.lines.some((l) => addressOf(l.tcp) === tab.address), 'the server saw the LAN address');
  });

  test(`a host behind ${nat} NAT reaches a public host over UDP, which sees the router's WAN address`, async () => {
    const { home, tab } = homes.find((h) => h.home.options.nat === nat)!;
    const answer = await askProbe(lab, tab, ['udp-ask', `${server.address}:3478`]);
    const seen = (answer.seen as Record<string, string>)[`${server.address}:3478`];
    assert.equal(addressOf(seen), home.wanAddress);
    assert.ok(udp.lines.some((l) => addressOf(l.udp) === home.wanAddress));
    assert.ok(!udp.lines.some((l) => addressOf(l.udp) === tab.address), 'the server saw the LAN address');
  });
}
