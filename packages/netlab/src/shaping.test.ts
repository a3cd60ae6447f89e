// A home's caps are tbf token buckets: a bulk TCP transfer through a 10 Mbit/s uplink (or a 20 Mbit/s
// downlink) measures close to the cap. The bounds are those of the shaper, not of the machine: an
// uncapped veth moves gigabits, and the rate is taken after the first megabyte, past TCP's slow start
// and the bucket's initial burst. They are kept generous (80 %–105 % of the cap) for a busy machine.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { NetLab, type LabHost } from './index';
import { askProbe, startProbe, waitFor } from './testing/index';

const SKIP_BYTES = 1_000_000;
let lab: NetLab;
let server: LabHost;

before(async () => {
  lab = await NetLab.create();
  server = await lab.publicHost('server');
});

after(() => lab?.close());

/** Mbit/s of `bytes` sent from one host to a sink on the other, measured at the sink. */
async function transfer(from: LabHost, to: LabHost, port: number, bytes: number): Promise<number> {
  const sink = await startProbe(lab, to, ['tcp-sink', String(port), String(SKIP_BYTES)]);
  const sent = await askProbe(lab, from, ['tcp-send', `${to.address}:${port}`, String(bytes)]);
  assert.equal(sent.error, undefined, JSON.stringify(sent));
  await waitFor(() => sink.lines.some((l) => 'mbit' in l));
  const result = sink.lines.find((l) => 'mbit' in l)!;
  assert.equal(result.bytes, bytes);
  return result.mbit as number;
}

test('a 10 Mbit/s uplink carries a bulk upload at about 10 Mbit/s', async (t) => {
  const home = await lab.home('h1', { nat: 'eim', uplinkMbit: 10 });
  const tab = await home.host('tab1');
  const mbit = await transfer(tab, server, 7000, 5_000_000);
  t.diagnostic(`measured ${mbit.toFixed(2)} Mbit/s`);
  assert.ok(mbit >= 8 && mbit <= 10.5, `measured ${mbit.toFixed(2)} Mbit/s`);
});

test('a 20 Mbit/s downlink carries a bulk download at about 20 Mbit/s', async (t) => {
  const home = await lab.home('h2', { nat: 'eim', downlinkMbit: 20 });
  const tab = await home.host('tab1');
  await startProbe(lab, server, ['tcp-source', '7001', '8000000']);
  const fetched = await askProbe(lab, tab, ['tcp-fetch', `${server.address}:7001`, String(SKIP_BYTES)]);
  assert.equal(fetched.bytes, 8_000_000);
  const mbit = fetched.mbit as number;
  t.diagnostic(`measured ${mbit.toFixed(2)} Mbit/s`);
  assert.ok(mbit >= 16 && mbit <= 21, `measured ${mbit.toFixed(2)} Mbit/s`);
});
