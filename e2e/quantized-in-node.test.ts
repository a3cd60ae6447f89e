// Block-quantized pseudo-gradients end to end (issue 38): three volunteer runtimes train trusted
// DiLoCo jobs with int8 and with 4-bit E2M1 payloads against the real server, through real Ring
// collectives (in-memory transport): every sync commits with one checksum (the members agree byte for
// byte), each volunteer sends (N−1) × the encoded size a sync. An untrusted job sends its members'
// contributions quantized through one checked group, and Moshpit groups (which average parameters) are refused the formats.
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

test('four volunteers train an untrusted DiLoCo job with e2m1 contributions in one checked group: every sync commits, fewer bytes than f16', { timeout: 240_000 }, async () => {
  const members = 4;
  const created = await server.createJob({ ...job, trust: 'untrusted', compression: 'e2m1', minWorkers: members, maxWorkers: members });
  const net = new MemoryNetwork();
  const vols = Array.from({ length: members }, () => nodeVolunteer(server.url, net));
  try {
    await waitFor('the job is done', async () => (await server.api(`/api/jobs/${created.id}`)).body.job.state === 'done', 210_000, 200);
    const rounds = (await server.api(`/api/jobs/${created.id}/rounds`)).body.rounds as { outcome: string; mode: string; detail: string; members: string[] }[];
    const committed = rounds.filter((r) => r.outcome === 'committed');
    assert.equal(committed.length, SYNCS, JSON.stringify(rounds));
    assert.ok(committed.every((r) => r.mode === 'group' && r.members.length === members), JSON.stringify(committed));
    assert.equal(new Set(committed.map((r) => r.detail)).size, SYNCS, 'every sync moved the parameters');
    // The same group over an f16 wire: (N−1)/N of the vector out at 2 bytes, then (N−1) × its own part's aggregate at 2.
    const length = PRESET_FLAT_LENGTHS['mlp-fashion'];
    const f16PerSync = 2 * 2 * length * (members - 1) / members;
    const floor = SYNCS * (quantizedBytes(length, 'e2m1') + 2 * length) * (members - 1) / members * 0.95;
    for (const v of vols) {
      const { bytesSent, lastError, volunteerId } = v.runtime.status;
      assert.equal(lastError, null, `${volunteerId}: ${lastError}\nserver log:\n${server.logTail()}`);
      // Contributions at half a byte a value (and a scale per 64), aggregates at 2, validators' copies on top.
      assert.ok(bytesSent >= floor && bytesSent < SYNCS * f16PerSync * 0.8, `${volunteerId} sent ${bytesSent}: f16 would be ${SYNCS * f16PerSync}`);
    }
  } finally {
    for (const v of vols) v.runtime.stop();
    await server.api(`/api/jobs/${created.id}/stop`, { method: 'POST' }).catch(() => {});
  }
});

test('quantized payloads average deltas: an untrusted job of Moshpit groups is refused them, and nothing is created', async () => {
  const before = (await server.api('/api/jobs')).body.jobs.length;
  const r = await server.api('/api/jobs', { method: 'POST', json: { ...job, strategy: 'localsgd', trust: 'untrusted', compression: 'int8', groupSize: 4, maxWorkers: 8 } });
  assert.equal(r.status, 400);
  assert.match(JSON.stringify(r.body), /not quantized deltas/);
  assert.equal((await server.api('/api/jobs')).body.jobs.length, before);
});
