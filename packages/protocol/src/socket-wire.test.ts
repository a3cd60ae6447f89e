import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodePacketText, encodePacket, SOCKET_PACKET, withAttachments, SocketWireError } from './socket-wire';

test('packets as socket.io-parser writes them: namespace, ack id, attachments', () => {
  assert.deepEqual(decodePacketText('0/volunteer,{"protocol":9}', 1), { type: 0, nsp: '/volunteer', id: null, data: { protocol: 9 }, attachments: 0 });
  assert.deepEqual(decodePacketText('2/volunteer,12["status",{}]', 1), { type: 2, nsp: '/volunteer', id: 12, data: ['status', {}], attachments: 0 });
  assert.deepEqual(decodePacketText('51-/volunteer,3["star:update",{"data":{"_placeholder":true,"num":0}}]', 1).attachments, 1);
  assert.deepEqual(decodePacketText('1/volunteer,', 1), { type: 1, nsp: '/volunteer', id: null, data: undefined, attachments: 0 });
  assert.deepEqual(decodePacketText('2["x"]', 1).nsp, '/');
});

test('what no client sends is a SocketWireError: unknown types, too many attachments, bad JSON, stray placeholders', () => {
  assert.throws(() => decodePacketText('9/volunteer,[]', 1), SocketWireError);
  assert.throws(() => decodePacketText('52-/volunteer,["a"]', 1), /2 binary attachments/);
  assert.throws(() => decodePacketText('5/volunteer,["a"]', 1), /attachment count/);
  assert.throws(() => decodePacketText('2/volunteer,["a"', 1), /not JSON/);
  assert.throws(() => withAttachments({ _placeholder: true, num: 1 }, [new Uint8Array(1)]), /attachment 1 of 1/);
});

test('events from the server: binary anywhere becomes a binary event with its attachments after it', () => {
  const data = new Uint8Array([1, 2, 3]);
  const [text, ...buffers] = encodePacket(SOCKET_PACKET.event, '/volunteer', ['star:result', { jobId: 'j', data }]);
  assert.equal(text, '451-/volunteer,["star:result",{"jobId":"j","data":{"_placeholder":true,"num":0}}]');
  assert.deepEqual(buffers, [data]);
  assert.deepEqual(encodePacket(SOCKET_PACKET.ack, '/volunteer', [{ ok: true }], 7), ['43/volunteer,7[{"ok":true}]']);
  const back = decodePacketText((text as string).slice(1), 1);
  assert.deepEqual(withAttachments(back.data, buffers as Uint8Array[]), ['star:result', { jobId: 'j', data }]);
});
