// The simulator checked against the real system: N Node volunteers (the worker runtime on the CPU
// backend) train the MLP through a real server, over in-memory links with the simulator's link model
// (bandwidth and latency, frames queued as a data channel queues them). What the volunteers took from
// each commit to their next ready (their local work) is measured and handed to the simulator as its
// work-time distribution; the simulator then predicts the rest, the barrier, the ring and the
// coordinator's round, and its round time, sync time and bytes are compared with the real ones.
// With `groupSize` the job is a Moshpit job (each sync's groups rings of their own), and a sync's round
// time is its begin to its last group's commit, as the server records it.
// In one Node process the volunteers' compute shares one thread, so one volunteer's steps wait for the
// others': their work times spread from one member's steps to all members' steps. That is what the
// simulator is given (as if each member were that slow on its own), not what it is tested on.
import { MemoryNetwork } from '@tabfleet/collective';
import { startTestServer, waitFor } from '@tabfleet/server/testing';
import { nodeVolunteer } from '@tabfleet/worker/testing';
import { simulate, SPEC_BASE, type Scenario } from './simulator';
import { distribution, median } from './stats';

export type Link = Pick<Scenario, 'bandwidthBytesPerSec' | 'latencyMs'>;

interface Figures {
  /** Median round time (begin to commit) and sync time (commit to commit), ms; bytes each member sent per round. */
  roundMs: number;
  syncMs: number;
  bytesSentPerRound: number;
}

export interface Validation {
  members: number;
  /** Moshpit groups of at most this many; absent: one ring. */
  groupSize?: number;
  syncsMeasured: number;
  /** The measured local work (commit to ready) the simulator drew from. */
  workMs: ReturnType<typeof distribution>;
  real: Figures;
  simulated: Figures;
  /** |simulated − real| ÷ real. */
  error: Figures;
}

/** Syncs before the measured ones: the first loads the model, and the first steps warm the JIT. */
const WARMUP_SYNCS = 2;

/** Runs a real job of `members` volunteers for `syncs` measured syncs, then the simulator on what they measured. */
export async function validateAt(members: number, syncs: number, link: Link, log: (line: string) => void = console.log, groupSize?: number): Promise<Validation> {
  const real = await realRun(members, syncs, link, groupSize);
  const scenario: Scenario = {
    members, churnPer10Min: 0, pacing: 'fixed', durationMs: Math.max(60_000, 40 * real.syncMs), stepMs: median(real.workMs) / SPEC_BASE.H, stepSigma: 0,
    ...link, seed: 1, workMs: real.workMs, ...(groupSize ? { groupSize } : {}),
  };
  const sim = await simulate(scenario);
  const simulated = { roundMs: sim.exchangeMs!.p50, syncMs: sim.syncMs!.p50, bytesSentPerRound: sim.bytesSentPerRound };
  const rel = (k: keyof Figures) => Math.abs(simulated[k] - real[k]) / real[k];
  const v: Validation = {
    members, ...(groupSize ? { groupSize } : {}), syncsMeasured: syncs, workMs: distribution(real.workMs),
    real: { roundMs: real.roundMs, syncMs: real.syncMs, bytesSentPerRound: real.bytesSentPerRound }, simulated,
    error: { roundMs: rel('roundMs'), syncMs: rel('syncMs'), bytesSentPerRound: rel('bytesSentPerRound') },
  };
  log(`validation N=${members}${groupSize ? ` in groups of ${groupSize}` : ''}: round ${real.roundMs.toFixed(0)} ms real, ${simulated.roundMs.toFixed(0)} simulated ` +
    `(${(100 * v.error.roundMs).toFixed(1)}%); sync ${real.syncMs.toFixed(0)} vs ${simulated.syncMs.toFixed(0)} ms (${(100 * v.error.syncMs).toFixed(1)}%); ` +
    `bytes/round ${real.bytesSentPerRound.toFixed(0)} vs ${simulated.bytesSentPerRound} (${(100 * v.error.bytesSentPerRound).toFixed(2)}%)`);
  return v;
}

async function realRun(members: number, syncs: number, link: Link, groupSize?: number): Promise<Figures & { workMs: number[] }> {
  const server = await startTestServer({ timing: { roundTimeoutMs: 60_000, barrierTimeoutMs: 120_000, loadTimeoutMs: 120_000 } });
  const net = new MemoryNetwork({ faults: { bandwidth: link.bandwidthBytesPerSec, latencyMs: link.latencyMs } });
  const job = await server.createJob({ ...SPEC_BASE, name: `validate-${members}`, pacing: 'fixed', minWorkers: members, maxWorkers: members, ...(groupSize ? { groupSize } : {}) });
  const vols = Array.from({ length: members }, () => nodeVolunteer(server.url, net, { jobId: job.id }));
  // When each round's commit first arrived (a Moshpit sync has a round per group), when each volunteer
  // said ready for the next sync after its round's commit, and each one's bytes sent at each commit. The
  // volunteers share one thread, so a commit's handler may run only after other volunteers' steps: the
  // first arrival is when the server sent it (give or take a loopback hop), and a volunteer's work is
  // its ready less that.
  const commitAt = new Map<number, number>();
  const readyAt: { seq: number; at: number; after: number }[] = [];
  const bytesAtCommit = vols.map(() => new Map<number, number>());
  vols.forEach((v, i) => {
    let lastCommit = -1;
    v.socket.onAny((event: string, payload: { seq?: number; roundId?: number }) => {
      if (event !== 'round:commit') return;
      if (!commitAt.has(payload.roundId!)) commitAt.set(payload.roundId!, performance.now());
      lastCommit = payload.roundId!;
      bytesAtCommit[i].set(payload.seq!, v.runtime.status.bytesSent);
    });
    v.socket.onAnyOutgoing((event: string, payload: { seq?: number }) => {
      if (event === 'round:ready') readyAt.push({ seq: payload.seq!, at: performance.now(), after: lastCommit });
    });
  });
  try {
    const last = WARMUP_SYNCS + syncs;
    await waitFor(`N=${members}: ${last} syncs`, async () => (await server.api(`/api/jobs/${job.id}`)).body.job.seq >= last, 600_000, 200);
    for (const v of vols) if (v.runtime.status.lastError) throw new Error(`${v.runtime.status.volunteerId}: ${v.runtime.status.lastError}`);
    const rounds = ((await server.api(`/api/jobs/${job.id}/rounds`)).body.rounds as { seq: number; outcome: string; startedAt: number; endedAt: number }[])
      .filter((r) => r.outcome === 'committed' && r.seq > WARMUP_SYNCS && r.seq <= last)
      .sort((a, b) => a.seq - b.seq);
    if (rounds.length !== syncs) throw new Error(`N=${members}: ${rounds.length} committed rounds of ${syncs} (one aborted?)`);
    const sent = bytesAtCommit.map((m) => (m.get(last)! - m.get(WARMUP_SYNCS)!) / syncs);
    return {
      roundMs: median(rounds.map((r) => r.endedAt - r.startedAt)),
      syncMs: median(rounds.slice(1).map((r, k) => r.endedAt - rounds[k].endedAt)),
      bytesSentPerRound: median(sent),
      workMs: readyAt.filter((r) => r.seq > WARMUP_SYNCS && r.seq <= last && commitAt.has(r.after)).map((r) => r.at - commitAt.get(r.after)!),
    };
  } finally {
    for (const v of vols) v.runtime.stop();
    await server.api(`/api/jobs/${job.id}/stop`, { method: 'POST' }).catch(() => {});
    await server.stop();
  }
}
