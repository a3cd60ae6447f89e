// The two NAT kinds differ in their mapping: behind `eim` one host socket keeps one public port for
// every destination (what lets STUN's server-reflexive candidate work for peers); behind `symmetric`
// each destination gets its own random port (what forces a TURN relay).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { NetLab, type LabHost } from './index';
import { addressOf, askProbe, portOf, startProbe } from './testing/index';

let lab: NetLab;
let targets: string[];

before(async () => {
  lab = await NetLab.create();
  const stun1 = await lab.publicHost('stun1');
  const stun2 = await lab.publicHost('stun2');
  await startProbe(lab, stun1, ['udp-echo', '3478']);
  await startProbe(lab, stun1, ['udp-echo', '3479']);
  await startProbe(lab, stun2, ['udp-echo', '3478']);
  targets = [`${stun1.address}:3478`, `${stun2.address}:3478`, `${stun1.address}:3479`];
});

after(() => lab?.close());

/** The public address:port each target saw for one socket of the host, and that socket's own port. */
async function mappings(host: LabHost): Promise<{ local: number; seen: string[] }> {
  const answer = await askProbe(lab, host, ['udp-ask', ...targets]);
  const seen = answer.seen as Record<string, string>;
  return { local: answer.local as number, seen: targets.map((t) => seen[t]) };
}

test('behind an endpoint-independent NAT, every destination sees one socket at the same WAN port', async () => {
  const home = await lab.home('eim', { nat: 'eim' });
  const tab = await home.host('tab1');
  const { local, seen } = await mappings(tab);
  assert.deepEqual(seen.map(addressOf), targets.map(() => home.wanAddress));
  assert.deepEqual(seen.map(portOf), targets.map(() => portOf(seen[0])), `ports seen: ${seen.join(' ')}`);
  // Linux masquerade keeps the socket's own port when it is free, as most home routers do.
  assert.equal(portOf(seen[0]), local);
});

test('behind a symmetric NAT, one socket shows different ports to different destinations', async () => {
  const home = await lab.home('sym', { nat: 'symmetric' });
  const tab = await home.host('tab1');
  const { seen } = await mappings(tab);
  assert.deepEqual(seen.map(addressOf), targets.map(() => home.wanAddress));
  // Each mapping's port is random, so two could match by chance (about 1 in 64k); all three sharing one
  // port (about 1 in 4·10⁹ by chance) means the mapping ignores the destination.
  assert.ok(new Set(seen.map(portOf)).size >= 2, `ports seen: ${seen.join(' ')}`);
});
