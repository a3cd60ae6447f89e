// Two volunteers in Node (the worker runtime, real WebRTC over @roamhq/wrtc) whose links may only go
// through TURN (`iceTransportPolicy: 'relay'`): the runtime hands the transport the ICE servers the
// server sent with the job, with the TURN credentials it issued each volunteer, and a real coturn
// (REST-API mode, the server's shared secret) relays the ring. Ring syncs commit and none falls back
// to the star; coturn's log shows an allocation under each volunteer's own username. Only 127.0.0.1.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import type { IceServer } from '@tabfleet/protocol';
import { createNodeWebRtcTransport } from '@tabfleet/collective/webrtc-node';
import { startCoturn, startTestServer, waitFor, type Coturn, type TestServer } from '@tabfleet/server/testing';
import { nodeVolunteer } from '@tabfleet/worker/testing';

const SECRET = 'relay-test-shared-secret-0123456789';
let coturn: Coturn | null = null;
let server: TestServer | null = null;
const vols: ReturnType<typeof nodeVolunteer>[] = [];
after(async () => {
  for (const v of vols) v.runtime.stop();
  await server?.stop();
  coturn?.stop();
});

test('a ring syncs through coturn with the TURN credentials the server issued each volunteer', { timeout: 240_000 }, async () => {
  coturn = await startCoturn(SECRET);
  server = await startTestServer({ ice: { turn: [coturn.url], turnSecret: SECRET }, timing: { roundTimeoutMs: 60_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 60_000 } });
  const job = await server.createJob({
    dataset: 'synthetic-blobs', preset: 'mlp-fashion', strategy: 'localsgd', H: 2, pacing: 'fixed',
    hyperparameters: { lr: 0.05, batchSize: 32 }, minWorkers: 2, maxWorkers: 2, targetSteps: 1000, trust: 'trusted',
  });
  // What each volunteer's links were opened with, by volunteer.
  const used = new Map<string, IceServer[][]>();
  for (let i = 0; i < 2; i++) {
    vols.push(nodeVolunteer(server.url, (self, signaler, iceServers) => createNodeWebRtcTransport({
      self, signaler, connectTimeoutMs: 60_000,
      rtcConfig: () => {
        used.set(self, [...(used.get(self) ?? []), iceServers()]);
        return { iceServers: iceServers(), iceTransportPolicy: 'relay' };
      },
    }), { jobId: job.id }));
  }
  const rounds = async () => (await server!.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { mode: string; outcome: string }[];
  await waitFor('two ring syncs commit', async () => (await rounds()).filter((r) => r.mode === 'ring' && r.outcome === 'committed').length >= 2, 180_000, 250)
    .catch((e: Error) => assert.fail(`${e.message}\nserver log:\n${server!.logTail()}\ncoturn log:\n${coturn!.log().slice(-3000)}`));
  assert.deepEqual((await rounds()).filter((r) => r.mode === 'star'), [], 'no star round');

  for (const v of vols) {
    const id = v.runtime.status.volunteerId!;
    // Its links were opened with the coturn URL and its own credentials (username "<expiry>:<its id>"), and coturn allocated a relay under them.
    const opened = used.get(id) ?? [];
    assert.ok(opened.length >= 1, `${id} opened no link`);
    for (const servers of opened) {
      assert.equal(servers.length, 1, JSON.stringify(servers));
      assert.deepEqual(servers[0].urls, [coturn.url]);
      assert.match(servers[0].username ?? '', new RegExp(`^\\d+:${id}$`));
    }
    assert.match(coturn.log(), new RegExp(`user <\\d+:${id}>: incoming packet ALLOCATE processed, success`));
  }
});
