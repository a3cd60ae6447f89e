// Links volunteers are handed (shard and checkpoint URLs share one base): the public URL when one is
// set, paths relative to the server when it listens on every interface, never 127.0.0.1 for others.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startTestServer } from '../src/testing/test-server';

async function assignedDataUrl(opts: Parameters<typeof startTestServer>[0]): Promise<string> {
  const server = await startTestServer(opts);
  try {
    const job = await server.createJob();
    const v = await server.volunteer();
    assert.equal((await v.request(job.id)).ok, true);
    for (let i = 0; i < 100 && !v.assignment; i++) await sleep(20);
    return v.assignment?.dataUrl ?? '';
  } finally {
    await server.stop();
  }
}

test('--public-url is the base of the links volunteers get', async () => {
  assert.match(await assignedDataUrl({ publicUrl: 'https://tabfleet.example:8443/' }), /^https:\/\/tabfleet\.example:8443\/datasets\/fashion-mnist\/shards\/0\/4\?/);
});

test('on 0.0.0.0 without --public-url the links are relative to the server the volunteer reached', async () => {
  const url = await assignedDataUrl({ host: '0.0.0.0' });
  assert.match(url, /^\/datasets\/fashion-mnist\/shards\/0\/4\?.*ticket=/);
});
