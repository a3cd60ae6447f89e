// Keep-outs live in the store, not in the coordinator's memory: a member evicted for a fault, the
// newcomers from its address, and an address kept out after integrity faults from it stay out when
// the server restarts on the same data directory (closed and started again in this process: a new
// hub and coordinator, the job loaded from SQLite), and may join again once their keep-out ends.
// Before, a restart forgot them.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { WorkerRow } from '@tabfleet/protocol';
import { ADDRESS_OFFENCES, KEEP_OUT_BASE_MS } from '../src/coordinator/penalties';
import type { ServerOptions } from '../src/app';
import { waitFor, type SimOptions, type SimVolunteer } from '../src/testing/sim-volunteer';
import { skippableClock, startTestServer, type TestServer } from '../src/testing/test-server';

const dataDir = mkdtempSync(join(tmpdir(), 'tabfleet-keep-outs-'));
// /32 networks: each loopback address is its own network, and keep-outs follow it to newcomers.
const time = skippableClock();
const OPTIONS: ServerOptions = {
  dataDir, clock: time.clock, networkRules: { v4: 32, v6: 128 }, addressLimits: { connections: 100, jobShare: 1 },
  timing: { roundTimeoutMs: 10_000, barrierTimeoutMs: 10_000, loadTimeoutMs: 1_500 },
};
let server: TestServer | null = null;
after(async () => {
  await server?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const endReason = (s: SimVolunteer) => (s.events.find((e) => e.name === 'job:end')?.payload as { reason: string } | undefined)?.reason;
const at = (host: number, clientId: string, opts: Partial<SimOptions> = {}) => server!.volunteer({ localAddress: `127.0.0.${host}`, clientId, ...opts });
async function refusal(s: SimVolunteer, jobId: string): Promise<string> {
  const r = await s.request(jobId);
  assert.equal(!r.ok && r.error.code, 'rate_limited', JSON.stringify(r));
  return !r.ok ? r.error.message : '';
}
/** Identities whose checked work gives them standing (they are not newcomers anywhere). */
async function giveStanding(ids: string[]): Promise<void> {
  for (const id of ids) for (let i = 0; i < 10; i++) await server!.store.addReputation(id, { verified: 1 });
}

test('a restart keeps a kept-out identity, the newcomers from its address and a kept-out address out until their keep-outs end', { timeout: 90_000 }, async () => {
  server = await startTestServer(OPTIONS);
  const job = await server.createJob({ minWorkers: 2, maxWorkers: 6, H: 1, trust: 'trusted', checkpointEvery: 1, targetSteps: 100_000 });
  for (const [host, id] of [[2, 'honest-id-000001'], [3, 'honest-id-000002']] as const) assert.equal((await (await at(host, id)).request(job.id)).ok, true);
  await waitFor('a checkpoint joiners load', async () => (await server!.api(`/api/jobs/${job.id}`)).body.job.latestCheckpoint, 20_000);
  // A first restart leaves the job at that checkpoint with no members: each joiner below, alone
  // (under minWorkers, so no round runs), is asked to load it at once.
  await server.stop();
  server = await startTestServer(OPTIONS);

  // A liveness fault: a joiner that never loads is evicted; newcomers from its address wait as long.
  const stalls = await at(11, 'stalling-id-00001');
  stalls.holdLoad = true;
  assert.equal((await stalls.request(job.id)).ok, true);
  await waitFor('the joiner that never loads is evicted', () => endReason(stalls), 20_000);
  assert.match(endReason(stalls)!, /model load timed out/);

  // Integrity faults: established identities from 127.0.0.9 report a model they did not load, until the address is kept out.
  const liars = Array.from({ length: ADDRESS_OFFENCES }, (_, i) => `liar-id-0000000${i + 1}`);
  await giveStanding([...liars, 'established-id-001']);
  for (const id of liars) {
    const liar = await at(9, id, { loadedChecksum: (honest) => (honest[0] === '0' ? '1' : '0') + honest.slice(1) });
    assert.equal((await liar.request(job.id)).ok, true);
    await waitFor(`${id} is evicted`, () => endReason(liar), 15_000);
    assert.match(endReason(liar)!, /loaded a model with checksum/);
  }
  assert.match(await refusal(await at(9, 'established-id-001'), job.id), /address kept out for \d+ s more after 3 faults from it/);
  await server.hub.flushed();

  // The restart: the server closes and starts again on the same data directory.
  await server.stop();
  server = await startTestServer(OPTIONS);
  const back = await at(11, 'stalling-id-00001');
  const fresh = await at(11, 'fresh-id-000000002');
  const established = await at(9, 'established-id-001');
  // Before: all three were let in at once.
  assert.match(await refusal(back, job.id), /kept out for \d+ s more after 1 fault\(s\), the last: model load timed out/);
  assert.match(await refusal(fresh, job.id), /a member from your address is kept out for \d+ s more \(model load timed out\); new identities from it wait as long/);
  assert.match(await refusal(established, job.id), /address kept out for \d+ s more after 3 faults from it, the last: loaded a model with checksum/);
  // The worker table still counts the evicted member's fault.
  const rows = (await server.api(`/api/jobs/${job.id}`)).body.workers as WorkerRow[];
  assert.equal(rows.find((w) => w.volunteerId === stalls.volunteerId)?.faults, 1, JSON.stringify(rows));

  // The keep-outs are the first (the base, 10 s from each fault): instead of waiting 10 s, the
  // server's clock moves on past them.
  time.skip(KEEP_OUT_BASE_MS);
  for (const s of [back, fresh, established]) assert.equal((await s.request(job.id)).ok, true, 'its keep-out is over');
  await server.stopJobs();
});
