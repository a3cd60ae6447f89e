// Block-quantized pseudo-gradients end to end (issue 38): three volunteer runtimes train trusted
// DiLoCo jobs with int8 and with 4-bit E2M1 payloads against the real server, through real Ring
// collectives (in-memory transport): every sync commits with one checksum (the members agree byte for
// byte), each volunteer sends (N−1) × the encoded size a sync, and an untrusted job is refused the format.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MemoryNetwork } from '@tabfleet/collective';
import { PRESET_FLAT_LENGTHS, quantizedBytes } from '@tabfleet/protocol';
import { startTestServer, waitFor, type TestServer } from '@tabfleet/server/testing';
import { nodeVolunteer } from '@tabfleet/worker/testing';

let server: TestServer;
before(async () => {
  server = await startTestServer({ timing: { roundTimeoutMs: 20_000, barrierTimeoutMs: 60_000, loadTimeoutMs: 30_000 } });
});
after(() => server.stop());

const SYNCS = 6;
const job = {
  dataset: 'synthetic-blobs' as const, preset: 'mlp-fashion' as const, strategy: 'diloco' as const, H: 2, pacing: 'fixed' as const, trust: 'trusted' as const,
  minWorkers: 3, maxWorkers: 3, targetSteps: 2 * SYNCS, checkpointEvery: 3, hyperparameters: { optimizer: 'adamw' as const, lr: 1e-3, batchSize: 16 },
};

for (const format of ['int8', 'e2m1'] as const) {
  test(`three volunteers train a DiLoCo job with ${format} pseudo-gradients: members agree, (N−1) × the encoded bytes a sync`, { timeout: 180_000 }, async () => {
    const created = await server.createJob({ ...job, compression: format });
    const net = new MemoryNetwork();
    const vols = [0, 1, 2].map(() => nodeVolunteer(server.url, net));
    try {
      await waitFor('the job is done', async () => (await server.api(`/api/jobs/${created.id}`)).body.job.state === 'done', 150_000, 200);
      const rounds = (await server.api(`/api/jobs/${created.id}/rounds`)).body.rounds as { outcome: string; mode: string; detail: string; members: string[] }[];
      const committed = rounds.filter((r) => r.outcome === 'committed');
      // A commit needs every member's checksum of the parameters it adopts to agree.
      assert.equal(committed.length, SYNCS, JSON.stringify(rounds));
      assert.ok(committed.every((r) => r.mode === 'ring' && r.members.length === 3), JSON.stringify(committed));
      assert.equal(new Set(committed.map((r) => r.detail)).size, SYNCS, 'every sync moved the parameters');
      const perSync = 2 * quantizedBytes(PRESET_FLAT_LENGTHS['mlp-fashion'], format);
      for (const v of vols) {
        const { bytesSent, lastError, volunteerId } = v.runtime.status;
        assert.equal(lastError, null, `${volunteerId}: ${lastError}\nserver log:\n${server.logTail()}`);
        // Frame headers (28 bytes a 64 KiB frame) and link probes on top of the payloads.
        assert.ok(bytesSent >= SYNCS * perSync && bytesSent < SYNCS * perSync * 1.02, `${volunteerId} sent ${bytesSent}, payloads ${SYNCS * perSync}`);
      }
    } finally {
      for (const v of vols) v.runtime.stop();
      await server.api(`/api/jobs/${created.id}/stop`, { method: 'POST' }).catch(() => {});
    }
  });
}

test('an untrusted job is refused quantized payloads, and nothing is created', async () => {
  const before = (await server.api('/api/jobs')).body.jobs.length;
  const r = await server.api('/api/jobs', { method: 'POST', json: { ...job, trust: 'untrusted', compression: 'int8' } });
  assert.equal(r.status, 400);
  assert.match(JSON.stringify(r.body), /int8 payloads go round a trusted ring/);
  assert.equal((await server.api('/api/jobs')).body.jobs.length, before);
});
