// A home with `blockUdp` behind a firewall that drops UDP leaving it: UDP to a public host never arrives
// (the router counts the drops) while TCP to the same host works. The network a TURN-over-TCP/TLS
// fallback is for.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { NetLab, type LabHost } from './index';
import { addressOf, askProbe, spawnProbe, startProbe, waitFor, type ProbeServer } from './testing/index';

let lab: NetLab;
let server: LabHost;
let udp: ProbeServer;

before(async () => {
  lab = await NetLab.create();
  server = await lab.publicHost('server');
  udp = await startProbe(lab, server, ['udp-echo', '3478']);
  await startProbe(lab, server, ['tcp-echo', '443']);
});

after(() => lab?.close());

test('blockUdp drops UDP leaving the home while TCP passes', async () => {
  const home = await lab.home('office', { nat: 'eim', blockUdp: true });
  const tab = await home.host('tab1');
  assert.equal(await home.counter('udp_blocked'), 0);
  // The client asks every 200 ms and would stop once answered; wait until the router dropped several.
  const client = spawnProbe(lab, tab, ['udp-ask', `${server.address}:3478`]);
  let answered = false;
  client.stdout!.on('data', () => (answered = true));
  await waitFor(async () => (await home.counter('udp_blocked')) >= 3);
  client.kill();
  assert.equal(answered, false, 'a UDP answer came back through the firewall');
  assert.deepEqual(udp.lines.filter((l) => 'udp' in l), [], 'UDP reached the public host');
  const tcp = await askProbe(lab, tab, ['tcp-ask', `${server.address}:443`]);
  assert.equal(addressOf(tcp.seen), home.wanAddress);
});

test('without blockUdp the same UDP gets through and nothing is counted as blocked', async () => {
  const home = await lab.home('open', { nat: 'eim' });
  const tab = await home.host('tab1');
  const answer = await askProbe(lab, tab, ['udp-ask', `${server.address}:3478`]);
  assert.equal(addressOf((answer.seen as Record<string, string>)[`${server.address}:3478`]), home.wanAddress);
  assert.equal(await home.counter('udp_blocked'), 0);
});
