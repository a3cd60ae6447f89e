// The worker's checkpoint transfers survive a dropped connection, through the real server: between
// them a TCP proxy cuts the connection once, mid-body. The upload (the round's uploader's chunks)
// asks the server what it holds and sends the rest; the model load asks for the rest with a Range
// request. Both end with the server's bytes exactly.
import assert from 'node:assert/strict';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import type { JobSpec, RoundBegin } from '@tabfleet/protocol';
import { checkpointOf, startTestServer, waitFor, type SimVolunteer, type TestServer } from '@tabfleet/server/testing';
import { fetchModel, putCheckpoint } from '@tabfleet/worker/testing';

let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 30_000, barrierTimeoutMs: 30_000, loadTimeoutMs: 60_000 } });
});
after(() => server.stop());

/** A proxy to the server that, once, closes a connection after `cutAt` bytes have gone one way through it (then it passes everything). */
async function cuttingProxy(target: string, direction: 'up' | 'down', cutAt: number): Promise<{ url: string; cuts: number; requests: string[]; close(): void }> {
  const { port } = new URL(target);
  let passed = 0;
  const state = { cuts: 0, requests: [] as string[] };
  const sockets = new Set<Socket>();
  const proxy: Server = createServer((client) => {
    const upstream = connect(Number(port), '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
    const relay = (from: Socket, to: Socket, way: 'up' | 'down') => from.on('data', (d: Buffer) => {
      if (way === 'up') state.requests.push(d.toString('latin1').split('\r\n\r\n')[0]);
      if (way === direction && state.cuts === 0 && passed + d.length > cutAt) {
        to.write(d.subarray(0, cutAt - passed), () => {
          client.destroy();
          upstream.destroy();
        });
        state.cuts++;
        return;
      }
      if (way === direction) passed += d.length;
      to.write(d);
    });
    relay(client, upstream, 'up');
    relay(upstream, client, 'down');
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  const address = proxy.address() as { port: number };
  return {
    url: `http://127.0.0.1:${address.port}`, get cuts() { return state.cuts; }, requests: state.requests,
    close: () => {
      for (const s of sockets) s.destroy();
      proxy.close();
    },
  };
}

async function uploaderOfSyncOne() {
  const job = await server.createJob({ minWorkers: 2, maxWorkers: 2, H: 1, checkpointEvery: 1, targetSteps: 1000 });
  const sims = [await server.volunteer({ checkpoint: () => null }), await server.volunteer({ checkpoint: () => null })];
  for (const s of sims) assert.equal((await s.request(job.id)).ok, true);
  const begin = (s: SimVolunteer) => s.events.find((e) => e.name === 'round:begin' && (e.payload as RoundBegin).seq === 1)?.payload as RoundBegin | undefined;
  const uploader = await waitFor('sync 1 commits with an uploader', () => sims.find((s) => begin(s)?.uploader === s.volunteerId && s.applied.has(1)), 20_000);
  return { jobId: job.id, uploader, file: checkpointOf(uploader.assignment!.job.spec as JobSpec, uploader.applied.get(1)!) };
}

test('an upload cut mid-chunk resumes from what the server holds; a load cut mid-body resumes with a Range request', { timeout: 90_000 }, async () => {
  const { jobId, uploader, file } = await uploaderOfSyncOne();
  const ack = (await uploader.emit('checkpoint:upload', { jobId, seq: 1, step: 1, bytes: file.byteLength })) as unknown as { url: string; token: string };
  const cutAt = Math.floor(file.byteLength / 3);

  const up = await cuttingProxy(server.url, 'up', cutAt);
  try {
    await putCheckpoint(ack.url.replace(server.url, up.url), ack.token, file);
    assert.equal(up.cuts, 1, 'the upload was cut once');
    assert.ok(up.requests.some((r) => r.startsWith('GET /api/checkpoint-uploads/')), 'after the cut it asked what the server holds');
    assert.ok(up.requests.filter((r) => r.startsWith('PUT ')).length >= 2, 'and sent the rest in another PUT');
  } finally {
    up.close();
  }
  const stored = await waitFor('the checkpoint is stored', () => server.store.latestCheckpoint(jobId), 10_000);
  assert.equal(stored.bytes, file.byteLength);

  const down = await cuttingProxy(server.url, 'down', cutAt);
  try {
    const loaded = await fetchModel(`${down.url}/api/jobs/${jobId}/checkpoints/1?ticket=${server.secrets.ticket(jobId, 1)}`);
    assert.equal(down.cuts, 1, 'the load was cut once');
    assert.ok(down.requests.some((r) => /\r\nrange: bytes=\d+-/i.test(r)), 'it asked for the rest with Range');
    assert.deepEqual(loaded, file);
  } finally {
    down.close();
  }
  await server.stopJobs();
});
