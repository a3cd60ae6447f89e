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

test('npm run bench -- coordinator --quick writes a complete coordinator JSON', { timeout: 150_000 }, async (t) => {
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
  const defined = ['begin_ms', 'commit_ms', 'round_ms', 'percentiles', 'barrier_server_ms', 'volunteers', 'kb_per_volunteer', 'held', 'max_volunteers', 'max_volunteers_two_nodes', 'gc_pause_ms'];
  for (const k of defined) assert.equal(typeof r.definitions[k], 'string', `definitions.${k}`);
  assert.ok(r.server.baseline.rssBytes > 0);
  assert.equal(r.failure, null, `no step broke off: ${r.stopReason}`);
  assert.equal(r.options.jobSpec.checkpointEvery, undefined, 'jobs checkpoint at the job default');

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
      checkDistribution(w.commit, `${ww} commit`);
      checkDistribution(w.round, `${ww} round`);
      // A whole-round sample is taken with a commit half (its begin half may fall in the window before).
      assert.ok(w.round.count <= w.commit.count && w.round.count >= w.commit.count / 2, `${ww}: ${w.round.count} whole-round samples of ${w.commit.count} commits`);
      assert.equal(w.server.volunteersConnected, s.volunteers, `${ww}: the server counts every volunteer`);
      assert.equal(w.connected, s.volunteers, `${ww}: the clients hold every connection`);
      assert.equal(w.disconnects, 0);
      assert.equal(w.errors, 0, `${ww}: ${s.errorSamples.join('; ')}`);
      assert.equal(w.jobsProgressing, s.jobs, `${ww}: every job committed a round`);
      assert.ok(w.roundsCommitted > 0 && w.roundsPerSec > 0);
      assert.ok(w.heartbeatsSent > 0, `${ww}: volunteers heartbeat`);
      assert.ok(w.eventsSent >= w.heartbeatsSent);
      assert.ok(w.server.cpuPercent > 0 && w.clients.cpuPercent > 0);
      assert.ok(w.server.gcPauseMs >= w.server.gcMaxPauseMs && w.server.gcMaxPauseMs >= 0 && Number.isInteger(w.server.gcMajor), `${ww}: GC pauses ${JSON.stringify(w.server)}`);
      // A round that took longer than its timeout would have been aborted, not sampled.
      assert.ok(w.barrier.max < r.options.roundTimeoutMs, `${ww}: barrier max ${w.barrier.max} ms`);
    }
    // Step figures pool every sample of every window: counts add up, and the pooled p99 lies within
    // the windows' own p99s and at most their max (a median of windows could not exceed the median).
    const windowsOf = (k: string) => s.windows.map((w: Json) => w[k]);
    for (const [half, key] of [['begin', 'barrier'], ['commit', 'commit'], ['whole', 'round']]) {
      const d = s.round[half];
      checkDistribution(d, `${where} round.${half}`);
      assert.equal(d.count, windowsOf(key).reduce((a: number, x: Json) => a + x.count, 0), `${where} round.${half}: pooled over the windows`);
      assert.ok(d.p99 >= Math.min(...windowsOf(key).map((x: Json) => x.p99)) && d.p99 <= Math.max(...windowsOf(key).map((x: Json) => x.max)), `${where} round.${half}.p99 ${d.p99}`);
    }
    assert.equal(s.underGoal, s.round.whole.p99 < r.summary.goal.p99Ms);
    // Like real tabs, ring members link to both neighbours once through the server: per link the
    // initiator sends offer + candidate and the other side answer + candidate, and all arrive.
    assert.equal(s.volunteerTotals.signalsSent, 4 * s.volunteers, `${where}: signals sent`);
    assert.equal(s.volunteerTotals.signalsReceived, s.volunteerTotals.signalsSent, `${where}: every signal relayed`);
    const m = s.memory;
    assert.ok(m.rssBytes > r.server.baseline.rssBytes * 0.5 && m.heapUsedBytes > 0);
    assert.ok(Number.isFinite(m.kbPerVolunteer) && Number.isFinite(m.heapKbPerVolunteer));
    assert.equal(m.kbPerVolunteer, Math.round(((m.rssBytes - r.server.baseline.rssBytes) / 1024 / s.volunteers) * 100) / 100);
    // A connection and its share of a job cost the server heap: quick steps measure 40–60 KiB after
    // GC (the full run 14 KiB at 6,400); 256 KiB would mean something is kept per event or round.
    assert.ok(m.heapKbPerVolunteer > 4 && m.heapKbPerVolunteer < 256, `${where}: ${m.heapKbPerVolunteer} KiB heap per volunteer`);
    // RSS moves by whole MiB (checkpoint buffers, allocator arenas), so over 40–80 volunteers only a bound.
    assert.ok(Math.abs(m.kbPerVolunteer) < 1024, `${where}: ${m.kbPerVolunteer} KiB RSS per volunteer`);
  }

  const last = r.steps[r.steps.length - 1];
  assert.ok(last.volunteerTotals.checkpointsUploaded > 0, 'jobs checkpoint at their default interval');
  const top = r.steps.filter((s: Json) => s.held && s.round.whole.p99 < 250).at(-1);
  assert.equal(r.summary.max_volunteers, top?.volunteers ?? 0, 'max_volunteers: the largest step whose whole round p99 < 250 ms');
  assert.equal(r.summary.max_volunteers_held, last.volunteers);
  if (top) {
    assert.equal(r.summary.round_p99_ms, top.round.whole.p99);
    assert.equal(r.summary.round_p50_ms, top.round.whole.p50);
    assert.equal(r.summary.begin_p99_ms, top.round.begin.p99);
    assert.equal(r.summary.commit_p99_ms, top.round.commit.p99);
    assert.equal(r.summary.kb_per_volunteer, top.memory.kbPerVolunteer);
  }
  // Issue 35's goal, fixed there: 10,000 on one node and 20,000 on two, p99 under 250 ms, at most 16 KiB each.
  assert.deepEqual(r.summary.goal, { volunteers: 10_000, twoNodeVolunteers: 20_000, p99Ms: 250, kbPerVolunteer: 16 });
  for (const k of ['volunteers', 'round_p99', 'kb_per_volunteer', 'two_nodes_volunteers']) assert.equal(typeof r.summary.meets_goal[k], 'boolean');

  // What measured it: the commit, when, the command and how long (bench/machine.ts runRecord).
  assert.match(r.commit, /^[0-9a-f]{40}(-dirty)?$/);
  assert.ok(Date.parse(r.date) > 0 && r.durationMs > 0 && r.command.startsWith('npm run bench -- coordinator'));

  // Two server nodes on a real redis-server: each step held, its volunteers counted over both nodes.
  const two: Json = r.twoNodes;
  assert.equal(two.nodes, 2);
  assert.equal(two.store, 'redis');
  assert.equal(two.failure, null, `two nodes: ${two.stopReason}`);
  assert.deepEqual(two.steps.map((s: Json) => s.volunteers), cfg.twoNodes.steps);
  for (const s of two.steps as Json[]) {
    assert.equal(s.held, true, `two nodes, step ${s.volunteers} held: ${s.problems.join('; ')}`);
    checkDistribution(s.round.whole, `two nodes, step ${s.volunteers} round.whole`);
    for (const w of s.windows as Json[]) {
      assert.equal(w.server.volunteersConnected, s.volunteers, 'both nodes\' volunteers counted');
      assert.ok(w.server.redisCpuPercent !== null && w.server.redisCpuPercent >= 0, 'the redis-server\'s CPU is measured');
    }
    // The nodes' own memory apart from the redis-server's (both in kbPerVolunteer).
    const m = s.memory;
    assert.ok(m.redisRssBytes > 0 && m.redisRssBytes < m.rssBytes, `two nodes, step ${s.volunteers}: redis RSS ${m.redisRssBytes} of ${m.rssBytes}`);
    assert.ok(Number.isFinite(m.nodesKbPerVolunteer), `two nodes, step ${s.volunteers}: nodesKbPerVolunteer`);
  }
  const topTwo = two.steps.filter((s: Json) => s.held && s.round.whole.p99 < 250).at(-1);
  assert.equal(r.summary.max_volunteers_two_nodes, topTwo?.volunteers ?? 0);
  assert.equal(two.summary.max_volunteers, r.summary.max_volunteers_two_nodes);
  assert.equal(two.summary.nodes_kb_per_volunteer, topTwo?.memory.nodesKbPerVolunteer ?? null);

  // The library floor in the same run: bare Socket.IO and the lean engine with the same rounds, and plain ws, each holding every connection.
  for (const kind of ['socketio', 'lean', 'ws']) {
    const f: Json = r.floor[kind];
    assert.equal(f.error, undefined, `${kind} floor: ${f.error}`);
    assert.equal(f.connections, cfg.floorConnections, `${kind} floor: every connection held`);
    assert.ok(Number.isFinite(f.kbPerConnection) && f.heapKbPerConnection > 0 && f.heapKbPerConnection < 256, `${kind} floor: ${JSON.stringify(f)}`);
  }
  // Its rounds ran: members' ready and result events (and heartbeats) reached the bare server, which spent CPU on them.
  for (const kind of ['socketio', 'lean']) {
    assert.ok(r.floor[kind].eventsPerSec > 0 && r.floor[kind].cpuUsPerEvent > 0, JSON.stringify(r.floor[kind]));
    checkDistribution(r.floor[kind].roundMs, `${kind} floor roundMs`);
  }
  assert.equal(r.floor.ws.cpuUsPerEvent, null, 'the ws floor only holds connections');
  assert.equal(r.summary.socketio_floor_round_p99_ms, r.floor.socketio.roundMs.p99);
  assert.equal(r.summary.socketio_floor_kb_per_connection, r.floor.socketio.kbPerConnection);
  assert.equal(r.summary.socketio_floor_cpu_us_per_event, r.floor.socketio.cpuUsPerEvent);
  assert.equal(r.summary.lean_floor_round_p99_ms, r.floor.lean.roundMs.p99);
  assert.equal(r.summary.lean_floor_kb_per_connection, r.floor.lean.kbPerConnection);
  assert.equal(r.summary.ws_floor_kb_per_connection, r.floor.ws.kbPerConnection);
  assert.equal(r.summary.largest_held_volunteers, last.volunteers);
  assert.equal(r.summary.server_cpu_us_per_event_largest_held, last.server.cpuUsPerEvent);
});
