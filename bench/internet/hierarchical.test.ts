// The hierarchical bench piece as a test (real WebRTC in the network lab, see hierarchical.ts): two
// homes of two Node volunteers behind EIM NATs run one job flat and one by homes; both commit every
// sync as ring rounds, and the homes' uplinks carry at least 1.8x fewer UDP bytes by homes. The byte
// counts are checked against what the algorithms must send at least (a home's share of the vector per
// sync; headers, acknowledgements and retransmissions come on top), so a ratio that came from
// something else (a stalled job, star rounds) fails too. Uplinks uncapped here: the tbf's drops add
// retransmissions that vary with the machine's load; the benchmark runs at 10 Mbit/s.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runHierarchical } from './hierarchical';

test('two homes of two: by homes, the uplinks carry at least 1.8x fewer bytes than the flat ring, and every sync commits', { timeout: 30 * 60_000 }, async () => {
  const syncs = 3;
  const f = await runHierarchical({ syncs, uplinkMbit: 0, log: (l) => console.log(l) });
  for (const run of [f.flat, f.hierarchical]) {
    assert.equal(run.committed, syncs, `job ${run.jobId}: ${JSON.stringify(run.rounds)}`);
    assert.deepEqual(run.rounds.filter((r) => r.mode !== 'ring'), [], 'no star round');
  }
  assert.deepEqual(f.flat.ringHomes, ['a', 'b', 'a', 'b'], 'the flat ring follows join order');
  assert.deepEqual(f.hierarchical.ringHomes, ['a', 'a', 'b', 'b'], 'by homes, members are listed home by home');
  // Per sync and home: flat, two members each send 1.5 vectors across; by homes, the leader sends one.
  const v = f.vectorBytes * syncs;
  for (const home of ['a', 'b']) {
    assert.ok(f.flat.uplinkBytes[home] >= 3 * v, `flat, home ${home}: ${f.flat.uplinkBytes[home]} bytes, under ${3 * v}`);
    assert.ok(f.hierarchical.uplinkBytes[home] >= v, `by homes, home ${home}: ${f.hierarchical.uplinkBytes[home]} bytes, under ${v}`);
  }
  // What the collectives sent (frames, LAN links included) per sync: flat, 1.5 vectors each; by homes,
  // one vector each in the home's allreduce of two, and a leader one more to the other leader and one
  // more as it broadcasts the result in its home: 3.
  const near = (bytes: number, vectors: number) => bytes >= vectors * v && bytes < vectors * v * 1.01;
  for (const [name, bytes] of Object.entries(f.flat.frameBytesSent)) assert.ok(near(bytes, 1.5), `flat, ${name} sent ${bytes}`);
  for (const [name, bytes] of Object.entries(f.hierarchical.frameBytesSent)) assert.ok(near(bytes, name.endsWith('1') ? 3 : 1), `by homes, ${name} sent ${bytes}`);
  assert.ok(f.uplinkBytesRatio >= 1.8, `flat / by homes = ${f.uplinkBytesRatio}`);
});
