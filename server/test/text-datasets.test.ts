// A text corpus over HTTP: a member of a GPT job downloads its shard of training windows, cut by the
// job's tokenizer and context, with the ticket from its assignment; the validation windows and the
// corpus's sizes are public; what names a tokenizer or context the corpus cannot be cut with is refused.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { decodeTextShard } from '@tabfleet/data';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

const gptJob = { preset: 'gpt' as const, gpt: { layers: 1, heads: 2, width: 32, context: 64 }, dataset: 'fortunes' as const, tokenizer: 'gpt2' as const, maxWorkers: 4, targetSteps: 100 };

test('a member of a GPT job downloads its shard of GPT-2 tokens with its ticket; the ticket opens nothing else', async () => {
  const job = await server.createJob(gptJob);
  const v = await server.volunteer();
  v.holdReady = true;
  assert.equal((await v.request(job.id)).ok, true);
  for (let i = 0; i < 100 && !v.assignment; i++) await sleep(20);
  const a = v.assignment!;
  assert.match(a.dataUrl ?? '', /\/datasets\/fortunes\/shards\/0\/4\?seed=1&tokenizer=gpt2&context=64&job=/);
  const res = await fetch(new URL(a.dataUrl!, server.url));
  assert.equal(res.status, 200);
  const shard = decodeTextShard(new Uint8Array(await res.arrayBuffer()), 50_257);
  assert.equal(shard.features, 64);
  const info = (await server.api('/datasets/fortunes/info?tokenizer=gpt2')).body;
  // A quarter of the training split's windows of 65 tokens (64 and the next one).
  assert.equal(shard.count, Math.ceil(Math.floor((info.train.tokens - 1) / 64) / 4));
  assert.ok(info.bytesPerToken > 3 && info.bytesPerToken < 4.5, JSON.stringify(info));
  // The same ticket does not open another cut of the corpus.
  const bytes = new URL(a.dataUrl!, server.url);
  bytes.searchParams.set('tokenizer', 'bytes');
  assert.equal((await fetch(bytes)).status, 401);
});

test('validation windows and corpus sizes are public; a tokenizer or context the corpus cannot be cut with is a clear 400', async () => {
  const res = await fetch(`${server.url}/datasets/fortunes/validation?tokenizer=bytes&context=128`);
  assert.equal(res.status, 200);
  const val = decodeTextShard(new Uint8Array(await res.arrayBuffer()), 256);
  assert.deepEqual([val.count, val.features], [64, 128]);
  const bytesInfo = (await server.api('/datasets/fortunes/info?tokenizer=bytes')).body;
  assert.equal(bytesInfo.bytesPerToken, 1);
  for (const [query, message] of [
    ['tokenizer=chars&context=64', /tokenizer must be one of bytes, gpt2/],
    ['tokenizer=nope&context=64', /tokenizer must be one of/],
    ['tokenizer=bytes&context=0', /context must be an integer in 2..4096/],
    ['tokenizer=bytes&context=abc', /context must be/],
  ] as const) {
    const r = await server.api(`/datasets/fortunes/validation?${query}`);
    assert.equal(r.status, 400, query);
    assert.match(r.body.error.message, message);
  }
});
