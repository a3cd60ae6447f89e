// A joiner's model from the members the server named, over an in-memory network on fake time: a member
// whose link never opens costs no wait once another's has, a member that sends a model with another
// digest is passed over for the next, and when none sends the agreed model the joiner gets null (it
// then loads the server's), as it does when the load is abandoned. Every member passed over is said in
// the log and its link closed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryNetwork, ModelShare } from '@tabfleet/collective';
import { encodeSafetensors, f32Tensor, jobSpecSchema, PRESET_LAYOUTS, verifyCheckpoint } from '@tabfleet/protocol';
import { FakeClock } from '@tabfleet/protocol/testing';
import { modelFromPeers, PEER_LINK_MS } from './peer-model';

const spec = jobSpecSchema.parse({ dataset: 'synthetic-blobs', preset: 'mlp-fashion', strategy: 'localsgd', H: 2, hyperparameters: { lr: 0.1, batchSize: 16 } });
const checkpoint = (value: number) => encodeSafetensors(Object.fromEntries(PRESET_LAYOUTS['mlp-fashion'].entries.map((p) => [p.name, f32Tensor(p.shape, new Float32Array(p.size).fill(value))])));
const agreed = checkpoint(0.25);
const digest = verifyCheckpoint('mlp-fashion', agreed).digest;

function lab(peers: Record<string, Uint8Array | 'unreachable'>) {
  const clock = new FakeClock();
  const net = new MemoryNetwork({ clock });
  const joiner = net.endpoint('joiner');
  const asked: string[] = [];
  for (const [id, model] of Object.entries(peers)) {
    const member = net.endpoint(id);
    if (model === 'unreachable') {
      joiner.connect = ((connect) => (peer: string) => (peer === id ? new Promise<void>(() => {}) : connect(peer)))(joiner.connect.bind(joiner));
      continue;
    }
    ModelShare.of(member).serve(async () => (asked.push(id), model));
  }
  const log: string[] = [];
  const linked = new Set<string>();
  const hooks = { link: (p: string) => linked.add(p), unlink: (p: string) => linked.delete(p), log: (l: string) => log.push(l), onBytes: () => {}, clock };
  const load = (order: string[]) => clock.run(modelFromPeers(joiner, { jobId: 'job-1', spec, seq: 4, peers: order, digest }, hooks));
  return { clock, load, asked, log, linked };
}

test('a member whose link does not open costs no wait once another\'s has', async () => {
  const { clock, load, asked, log, linked } = lab({ far: 'unreachable', near: agreed });
  const t0 = clock.now();
  const got = await load(['far', 'near']);
  assert.equal(got?.peer, 'near');
  assert.deepEqual(got?.bytes, agreed);
  assert.deepEqual(asked, ['near']);
  assert.ok(clock.now() - t0 < PEER_LINK_MS, `took ${clock.now() - t0} ms`);
  assert.deepEqual(log, [], 'nothing said of the member it never needed');
  assert.equal(linked.size, 0, 'no link is signaled as a load link after');
});

test('a member that sends a model with another digest is passed over for the next', async () => {
  const { load, asked, log } = lab({ liar: checkpoint(0.5), honest: agreed });
  const got = await load(['liar', 'honest']);
  assert.equal(got?.peer, 'honest');
  assert.deepEqual(asked, ['liar', 'honest']);
  assert.equal(log.length, 1);
  assert.match(log[0], new RegExp(`from liar was not taken: it sent a model whose digest is [0-9a-f]+, not the agreed ${digest}`));
});

test('when no member sends the agreed model, nothing is taken', async () => {
  const { load, log } = lab({ liar: checkpoint(0.5), garbage: new Uint8Array([1, 2, 3]), far: 'unreachable' });
  assert.equal(await load(['liar', 'garbage', 'far']), null);
  assert.equal(log.length, 3, log.join('\n'));
  assert.ok(log.some((l) => /from garbage was not taken: checkpoint is not valid safetensors/.test(l)), log.join('\n'));
  assert.ok(log.some((l) => new RegExp(`from far was not taken: no link within ${PEER_LINK_MS} ms`).test(l)), log.join('\n'));
});

test('a load abandoned mid-transfer (the server sent a newer model) takes nothing and closes the link', async () => {
  const clock = new FakeClock();
  const net = new MemoryNetwork({ clock, faults: { bandwidth: 100_000 } });
  const joiner = net.endpoint('joiner');
  ModelShare.of(net.endpoint('slow')).serve(async () => agreed);
  const abandon = new AbortController();
  let bytes = 0;
  const log: string[] = [];
  const hooks = {
    link: () => {}, unlink: () => {}, log: (l: string) => log.push(l), clock, signal: abandon.signal,
    onBytes: (n: number) => {
      bytes += n;
      if (bytes > agreed.byteLength / 4) abandon.abort();
    },
  };
  const got = await clock.run(modelFromPeers(joiner, { jobId: 'job-1', spec, seq: 4, peers: ['slow'], digest }, hooks));
  assert.equal(got, null);
  assert.ok(bytes < agreed.byteLength / 2, `${bytes} of ${agreed.byteLength} bytes came`);
  assert.equal(joiner.isConnected('slow'), false, 'the member stops sending');
  assert.deepEqual(log, ['the model of sync 4 from members is abandoned: the server sent a newer one']);
});
