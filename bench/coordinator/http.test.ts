// The coordinator bench's lightFetch makes the requests Node's fetch makes for a checkpoint upload
// (what the server sees), and answers putCheckpoint as fetch does, a refusal included.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import { after, test } from 'node:test';
import { putCheckpoint } from '@tabfleet/worker/checkpoint-transfer';
import { lightFetch } from './http';

interface Seen { method?: string; headers: IncomingMessage['headers']; body: Buffer }
const seen: Seen[] = [];
const server = createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => {
    const body = Buffer.concat(parts);
    seen.push({ method: req.method, headers: req.headers, body });
    if (req.headers.authorization !== 'Bearer good') return void res.writeHead(403, { 'content-type': 'text/plain' }).end('wrong token');
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ received: Number(/\/(\d+)$/.exec(String(req.headers['content-range']))![1]) }));
  });
});
const url = await new Promise<string>((r) => server.listen(0, '127.0.0.1', () => r(`http://127.0.0.1:${(server.address() as { port: number }).port}/up`)));
after(() => server.close());

const data = Uint8Array.from({ length: 300_000 }, (_, i) => i % 251);

test('an upload through lightFetch sends what one through fetch sends', async () => {
  await putCheckpoint(url, 'good', data);
  await putCheckpoint(url, 'good', data, undefined, lightFetch);
  const [viaFetch, viaLight] = seen.splice(0);
  for (const s of [viaFetch, viaLight]) assert.deepEqual(s.body, Buffer.from(data));
  assert.equal(viaLight.method, viaFetch.method);
  for (const h of ['authorization', 'content-type', 'content-range', 'content-length']) assert.equal(viaLight.headers[h], viaFetch.headers[h], h);
});

test('a refusal comes back to putCheckpoint as through fetch: the status and the server\'s words', async () => {
  const outcome = (f?: typeof lightFetch) => putCheckpoint(url, 'bad', data, undefined, f).then(() => 'uploaded', (e: Error) => e.message);
  assert.equal(await outcome(lightFetch), await outcome());
  assert.match(await outcome(lightFetch), /HTTP 403 wrong token/);
  await assert.rejects(lightFetch('https://127.0.0.1/'), /plain HTTP/);
});
