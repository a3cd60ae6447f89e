// Texts over HTTP: a member of a GPT job downloads its shard of training windows, cut by the job's
// tokenizer and context, with the ticket from its assignment; the fortunes corpus's validation windows
// and sizes are public, an upload's are not; what names a tokenizer or context the text cannot be cut
// with is refused; researchers upload texts, and a bad file is refused with the reason, storing nothing.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { decodeTextShard, generateCorpus } from '@tabfleet/data';
import { BASE_JOB, startTestServer, type TestServer } from '../src/testing/test-server';

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

/** 240 paragraphs of the generated toy corpus: text only tests write. */
function toyText(): string {
  return Array.from({ length: 240 }, (_, i) => generateCorpus(3, i + 1).trim()).join('\n\n');
}

async function upload(body: Uint8Array<ArrayBuffer> | string, name = 'toy'): Promise<{ status: number; body: any }> {
  const res = await fetch(`${server.url}/api/datasets?name=${encodeURIComponent(name)}`, { method: 'POST', headers: { authorization: 'Bearer test-token', 'content-type': 'text/plain' }, body });
  return { status: res.status, body: await res.json() };
}

test('a researcher uploads a text; a GPT job names it; its member gets its shard and the validation windows with its ticket, nobody else does', async () => {
  const up = await upload(toyText());
  assert.equal(up.status, 201, JSON.stringify(up.body));
  const info = up.body.dataset;
  assert.match(info.id, /^u-[0-9a-f]{12}$/);
  assert.equal(info.name, 'toy');
  assert.ok(info.records.validation > 0 && info.records.train > info.records.validation * 10, JSON.stringify(info.records));
  assert.deepEqual((await server.api('/api/datasets')).body.datasets.map((d: { id: string }) => d.id).includes(info.id), true);

  const job = await server.createJob({ ...gptJob, dataset: 'text-upload', upload: info.id, tokenizer: 'bytes', gpt: { ...gptJob.gpt, context: 32 }, maxWorkers: 2 });
  const v = await server.volunteer();
  v.holdReady = true;
  assert.equal((await v.request(job.id)).ok, true);
  for (let i = 0; i < 100 && !v.assignment; i++) await sleep(20);
  const shardUrl = new URL(v.assignment!.dataUrl!, server.url);
  assert.match(shardUrl.pathname, new RegExp(`^/datasets/uploads/${info.id}/shards/0/2$`));
  const shard = decodeTextShard(new Uint8Array(await (await fetch(shardUrl)).arrayBuffer()), 256);
  assert.ok(shard.count > 10 && shard.features === 32, `${shard.count} windows`);
  const validation = new URL(shardUrl.href.replace(/\/shards\/0\/2\?/, '/validation?'));
  validation.searchParams.set('shard', '0/2');
  assert.equal((await fetch(validation)).status, 200, 'the member reads the validation windows with its ticket');
  validation.searchParams.delete('ticket');
  assert.equal((await fetch(validation)).status, 401, 'an upload is not public');
  assert.equal((await fetch(`${server.url}/datasets/uploads/${info.id}/info?tokenizer=bytes`)).status, 401);
  assert.equal((await server.api(`/datasets/uploads/${info.id}/info?tokenizer=bytes`)).body.bytesPerToken, 1);
});

test('a broken upload is refused with what is wrong and stores nothing; a job naming an upload this server lacks is refused', async () => {
  const before = (await server.api('/api/datasets')).body.datasets.length;
  const uploaded = () => (existsSync(join(server.dataDir, 'uploads')) ? readdirSync(join(server.dataDir, 'uploads')).length : 0);
  const files = uploaded();
  const latin1 = Uint8Array.from([...new TextEncoder().encode(toyText()), 0x63, 0x61, 0x66, 0xe9]);
  for (const [body, message] of [
    [latin1, /upload "toy": the file is not UTF-8 text: the character at byte \d+ is malformed \(bytes e9\)/],
    ['', /the file is empty/],
    ['one short line', /too little text: 14 bytes/],
    ['x'.repeat(5000), /it has 1 paragraphs; a held-out part needs more/],
  ] as const) {
    const r = await upload(body);
    assert.equal(r.status, 400, String(message));
    assert.match(r.body.error.message, message);
  }
  const noToken = await fetch(`${server.url}/api/datasets`, { method: 'POST', body: toyText() });
  assert.equal(noToken.status, 401);
  assert.equal((await server.api('/api/datasets')).body.datasets.length, before, 'nothing listed');
  assert.equal(uploaded(), files, 'nothing written');
  const r = await server.api('/api/jobs', { method: 'POST', json: { ...BASE_JOB, ...gptJob, dataset: 'text-upload', upload: 'u-000000000000', tokenizer: 'bytes' } });
  assert.equal(r.status, 400);
  assert.match(r.body.error.message, /upload: no uploaded dataset u-000000000000 on this server/);
});
