// `npm run bench -- coordinator --quick` end to end (dispatcher, a server process, client processes
// of simulated volunteers) into a temporary file, then the JSON's shape: every step measured, figures
// finite and sane, the summary consistent with the steps. Speed lives in the JSON, not here.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runBench } from './child';
import { coordinatorConfig } from './coordinator';
import { median } from './stats';

const dir = mkdtempSync(join(tmpdir(), 'tabfleet-bench-coordinator-'));
after(() => rmSync(dir, { recursive: true, force: true }));

// The report is checked field by field below, so it is read loosely typed.
type Json = Record<string, any>;

/** `min` below 0 for figures that mix a client clock with the server's whole milliseconds. */
function checkDistribution(d: Json, where: string, min = 0): void {
  assert.ok(Number.isInteger(d.count) && d.count > 0, `${where}: samples`);
  for (const k of ['p50', 'p90', 'p99', 'max', 'mean']) assert.ok(Number.isFinite(d[k]) && d[k] >= min, `${where}.${k} = ${d[k]}`);
  assert.ok(d.p50 <= d.p90 && d.p90 <= d.p99 && d.p99 <= d.max, `${where}: percentiles in order`);
}

test('npm run bench -- coordinator --quick writes a complete coordinator JSON', { timeout: 120_000 }, async (t) => {
  const out = join(dir, 'coordinator.json');
  const runs = 2;
  const code = await runBench(['coordinator', '--quick', '--runs', String(runs), '--out', out], t.signal);
  assert.equal(code, 0, 'the benchmark exits 0');
  const r: Json = JSON.parse(readFileSync(out, 'utf8'));
  const cfg = coordinatorConfig(runs, true);
  assert.equal(r.benchmark, 'coordinator');
  assert.equal(r.quick, true);
  assert.equal(r.options.runs, runs);
  assert.deepEqual(r.options.steps, cfg.steps);
  assert.ok(r.machine.cores >= 1 && r.machine.cpuModel.length > 0);
  assert.equal(typeof r.machine.note, 'string');
  for (const k of ['barrier_ms', 'barrier_server_ms', 'kb_per_volunteer', 'held', 'max_volunteers']) assert.equal(typeof r.definitions[k], 'string', `definitions.${k}`);
  assert.ok(r.server.baseline.rssBytes > 0);
  assert.equal(r.failure, null, `no step broke off: ${r.stopReason}`);

  // The quick steps are small enough for any machine: all of them are held.
  assert.deepEqual(r.steps.map((s: Json) => s.volunteers), cfg.steps);
  for (const s of r.steps as Json[]) {
    const where = `step ${s.volunteers}`;
    assert.equal(s.held, true, `${where} held: ${s.problems.join('; ')}`);
    assert.equal(s.jobs, Math.ceil(s.volunteers / cfg.jobSize));
    assert.ok(s.clientProcesses >= Math.ceil(s.volunteers / cfg.perProcess), `${where}: volunteers spread over client processes`);
    assert.ok(s.ramp.added > 0 && s.ramp.joinsPerSec > 0);
    checkDistribution(s.ramp.admitMs, `${where} ramp.admitMs`);
    assert.equal(s.windows.length, runs, `${where}: one window per run`);
    for (const [i, w] of (s.windows as Json[]).entries()) {
      const ww = `${where} window ${i + 1}`;
      checkDistribution(w.barrier, `${ww} barrier`);
      checkDistribution(w.barrierServer, `${ww} barrierServer`, -1);
      assert.equal(w.server.volunteersConnected, s.volunteers, `${ww}: the server counts every volunteer`);
      assert.equal(w.connected, s.volunteers, `${ww}: the clients hold every connection`);
      assert.equal(w.disconnects, 0);
      assert.equal(w.errors, 0, `${ww}: ${s.errorSamples.join('; ')}`);
      assert.equal(w.jobsProgressing, s.jobs, `${ww}: every job committed a round`);
      assert.ok(w.roundsCommitted > 0 && w.roundsPerSec > 0);
      assert.ok(w.heartbeatsSent > 0, `${ww}: volunteers heartbeat`);
      assert.ok(w.eventsSent >= w.heartbeatsSent);
      assert.ok(w.server.cpuPercent > 0 && w.clients.cpuPercent > 0);
      // A round that took longer than its timeout would have been aborted, not sampled.
      assert.ok(w.barrier.max < r.options.roundTimeoutMs, `${ww}: barrier max ${w.barrier.max} ms`);
    }
    assert.equal(s.barrier.p99Ms, Math.round(median(s.windows.map((w: Json) => w.barrier.p99)) * 100) / 100, `${where}: p99 is the median of the windows'`);
    assert.equal(s.barrier.p50Ms, Math.round(median(s.windows.map((w: Json) => w.barrier.p50)) * 100) / 100);
    checkDistribution(s.barrier.pooled, `${where} pooled`);
    assert.equal(s.barrier.pooled.count, s.windows.reduce((a: number, w: Json) => a + w.barrier.count, 0));
    const m = s.memory;
    assert.ok(m.rssBytes > r.server.baseline.rssBytes * 0.5 && m.heapUsedBytes > 0);
    assert.ok(Number.isFinite(m.kbPerVolunteer) && Number.isFinite(m.heapKbPerVolunteer));
    assert.equal(m.kbPerVolunteer, Math.round(((m.rssBytes - r.server.baseline.rssBytes) / 1024 / s.volunteers) * 100) / 100);
    // Sane: a connection costs the server something, and not megabytes.
    assert.ok(m.metricsKbPerVolunteer > -2048 && m.metricsKbPerVolunteer < 2048, `${where}: ${m.metricsKbPerVolunteer} KiB per volunteer`);
  }

  const last = r.steps[r.steps.length - 1];
  assert.equal(r.summary.max_volunteers, last.volunteers);
  assert.equal(r.summary.round_p99_ms, last.barrier.p99Ms);
  assert.equal(r.summary.round_p50_ms, last.barrier.p50Ms);
  assert.equal(r.summary.kb_per_volunteer, last.memory.kbPerVolunteer);
  assert.deepEqual(r.summary.goal, { volunteers: 5000, p99Ms: 250, kbPerVolunteer: 20 });
  for (const k of ['volunteers', 'round_p99', 'kb_per_volunteer']) assert.equal(typeof r.summary.meets_goal[k], 'boolean');
});
