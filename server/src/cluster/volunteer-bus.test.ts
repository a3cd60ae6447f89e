import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeDelivery, encodeDelivery } from './volunteer-bus';

test('a delivery between nodes keeps its rooms, event and binaries', () => {
  const data = new Uint8Array([9, 8, 7, 6]);
  const got = decodeDelivery(encodeDelivery('node-a', { rooms: ['v:1', 'v:2'], event: 'star:result', args: [{ jobId: 'j', data, n: 2 }] }));
  assert.equal(got.from, 'node-a');
  assert.deepEqual(got.rooms, ['v:1', 'v:2']);
  assert.equal(got.event, 'star:result');
  const arg = got.args[0] as { data: Uint8Array; n: number };
  assert.deepEqual([...arg.data], [9, 8, 7, 6]);
  assert.equal(arg.n, 2);
});
