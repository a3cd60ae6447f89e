// A joiner whose shard download the server refuses for now (its address already has
// SHARD_DOWNLOADS_PER_ADDRESS downloads in flight) waits on the server, not on its own link, so its
// load deadline waits too. Real server, real HTTP: four downloads from 127.0.0.1 that read nothing hold
// the address's slots; the joiner (it never reports a load) asks for its shard with its ticket every
// half second and is refused with 429 each time. Before, it was evicted at the load timeout.
import assert from 'node:assert/strict';
import { get, type ClientRequest } from 'node:http';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Assignment } from '@tabfleet/protocol';
import { SHARD_DOWNLOADS_PER_ADDRESS } from '../src/http/datasets';
import { waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

const LOAD_TIMEOUT_MS = 3_000;
let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 30_000, barrierTimeoutMs: 30_000, loadTimeoutMs: LOAD_TIMEOUT_MS } });
});
after(() => server.stop());

/** A researcher's download of a shard that reads nothing: it holds one of the address's slots until it is destroyed. */
function stalledDownload(index: number): Promise<ClientRequest> {
  return new Promise((resolve, reject) => {
    const req = get(`${server.url}/datasets/fashion-mnist/shards/${index}/8?seed=1`, { headers: { authorization: 'Bearer test-token' }, agent: false }, (res) => {
      assert.equal(res.statusCode, 200);
      res.pause();
      resolve(req);
    });
    req.on('error', (e) => (req.destroyed ? undefined : reject(e)));
  });
}

test('a joiner kept waiting for a download slot is not evicted at the load timeout while it is refused; once it stops asking, it is', { timeout: 120_000 }, async () => {
  const job = await server.createJob({ dataset: 'fashion-mnist', minWorkers: 2, maxWorkers: 8, targetSteps: 1_000 });
  // The slots are taken first: building a shard takes seconds, longer than the joiner's load timeout. One
  // shard, built once: the server closes a download that reads nothing for 30 s (SHARD_IDLE_TIMEOUT_MS),
  // and this test must be done with them before then on a busy machine.
  const held = [await stalledDownload(0)];
  held.push(...(await Promise.all(Array.from({ length: SHARD_DOWNLOADS_PER_ADDRESS - 1 }, () => stalledDownload(0)))));
  const joiner = await server.volunteer();
  joiner.holdLoad = true;
  try {
    await joiner.request(job.id);
    await waitFor('asked to load', () => joiner.events.some((e) => e.name === 'model:load'));
    const assignment = joiner.events.find((e) => e.name === 'job:assign')!.payload as Assignment;
    const shardUrl = new URL(assignment.dataUrl!, server.url).href;
    const ended = () => joiner.events.some((e) => e.name === 'job:end');
    // Refused for twice the load timeout: each refusal gives the load the load timeout from then.
    const until = Date.now() + 2 * LOAD_TIMEOUT_MS;
    let refusals = 0;
    while (Date.now() < until) {
      const res = await fetch(shardUrl);
      assert.equal(res.status, 429, await res.text());
      refusals++;
      await sleep(500);
    }
    assert.ok(refusals >= 4, `${refusals} refusals`);
    assert.equal(ended(), false, `still loading after ${2 * LOAD_TIMEOUT_MS} ms of refusals`);
    // No more refusals: it is on its own clock again.
    await waitFor('evicted at the load timeout', ended, 4 * LOAD_TIMEOUT_MS);
    const end = joiner.events.find((e) => e.name === 'job:end')!.payload as { reason: string };
    assert.match(end.reason, /load timed out/);
  } finally {
    for (const r of held) r.destroy();
    await server.api(`/api/jobs/${job.id}/stop`, { method: 'POST' });
    joiner.close();
  }
});
