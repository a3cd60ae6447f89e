// The worker table says how each member's last round travelled: a star round (through the server,
// when peer links did not open) reads 'star', the ring round after it 'ring' (the dashboard shows it).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { RoundBegin, WorkerRow } from '@tabfleet/protocol';
import { waitFor } from '../src/testing/sim-volunteer';
import { startTestServer, type TestServer } from '../src/testing/test-server';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.stop());

test("a member's row names the mode of its last committed round: star, then ring", async () => {
  const job = await server.createJob({ preset: 'mlp-fashion', minWorkers: 3, maxWorkers: 3, trust: 'trusted' });
  const sims = await Promise.all([0, 1, 2].map(() => server.volunteer()));
  sims[1].failRound = (r) => (r.mode === 'ring' && r.seq === 1 ? 'unreachable' : null);
  // Every round is held open until released, so the rows can be read between two rounds.
  for (const s of sims) s.holdRounds = true;
  for (const s of sims) await s.request(job.id);
  const begun = (mode: string, after = 0) => waitFor(`a ${mode} round`, () => {
    const rounds = sims.map((s) => s.events.filter((e) => e.name === 'round:begin').map((e) => e.payload as RoundBegin).find((p) => p.mode === mode && p.roundId > after));
    return rounds.every((r) => r) ? rounds[0] : null;
  });
  const workers = async () => (await server.api(`/api/jobs/${job.id}`)).body.workers as WorkerRow[];
  const failedRing = await begun('ring');
  for (const s of sims) s.releaseRound();
  const firstStar = await begun('star', failedRing.roundId);
  for (const s of sims) s.releaseRound();
  // After a star sync that peers could not link for, the next sync skips the peer attempt (path-fallback.ts).
  const star = await begun('star', firstStar.roundId);
  for (const s of sims) s.releaseRound();
  const next = await begun('ring', star.roundId);
  // The star round committed and the next one is held: every row shows the star round.
  const rows = await workers();
  assert.deepEqual(rows.map((w) => [w.lastRound, w.lastRoundMode]), sims.map(() => [star.roundId, 'star']), JSON.stringify(rows));
  for (const s of sims) s.releaseRound();
  await waitFor('the ring round commits and every row shows it', async () => (await workers()).every((w) => w.lastRound === next.roundId && w.lastRoundMode === 'ring'));
});
