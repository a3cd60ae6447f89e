// Two homes of two volunteers each behind endpoint-independent NATs in the network lab, the server
// (and a STUN server, coturn in --stun-only mode) in a public host: the same trusted ring job runs
// flat (`homeRings: false`) and by homes (the default), and the homes' routers count the UDP bytes
// (the peer links: WebRTC data channels) leaving through their WAN. Everything runs on real links:
// Node volunteers (the worker runtime on the CPU backend, WebRTC through @roamhq/wrtc) inside the
// homes' host namespaces, wall clock, nothing modeled.
//
// The volunteers join one at a time in the order a1, b1, a2, b2 (as volunteers arriving on their own
// would, homes interleaved): the flat ring follows join order, so each of its links crosses a home's
// uplink and a home sends 2 × 1.5 vectors per sync; by homes, a leader sends one (2(L − 1)/L, L = 2).
// With the homes side by side in the flat ring (a1, a2, b1, b2) it would be 1.5 against 1.
// The counts are of everything UDP the routers send out: DTLS, SCTP and IP headers, SCTP's
// acknowledgements of what the home receives, and retransmissions (measured here 1.1–1.7x the vector
// bytes alone; more under a tbf cap, which drops, and on a loaded machine).
import { layoutOf } from '@tabfleet/protocol';
import { openVolunteerLab, type RoundRow, type VolunteerLab } from './volunteer-lab';

export interface HierarchicalOptions {
  /** Syncs each job runs (default 3). */
  syncs?: number;
  /** Cap on each home's uplink, Mbit/s (default 10; 0: none). */
  uplinkMbit?: number;
  log?: (line: string) => void;
}

export interface RunFigures {
  jobId: string;
  /** Committed ring rounds, and every round's mode and outcome. */
  committed: number;
  rounds: RoundRow[];
  /** Each home's UDP bytes out through its WAN during the job, and their sum. */
  uplinkBytes: Record<string, number>;
  uplinkBytesTotal: number;
  /** What each volunteer's collectives sent (frames, all links, LAN ones included), by host (a1, b1, …). */
  frameBytesSent: Record<string, number>;
  /** Sync time: committed rounds' begin to commit, ms. */
  syncMsP50: number;
  syncMsMean: number;
  /** The volunteers' homes in the ring order of the first round. */
  ringHomes: string[];
}

export interface HierarchicalFigures {
  homes: number;
  tabsPerHome: number;
  syncs: number;
  uplinkMbit: number | null;
  /** The model's vector, bytes (fp32). */
  vectorBytes: number;
  flat: RunFigures;
  hierarchical: RunFigures;
  /** Flat ÷ hierarchical bytes over the homes' uplinks (the benchmark key `hierarchical_uplink_bytes_ratio`). */
  uplinkBytesRatio: number;
  /** Flat ÷ hierarchical median sync time. */
  syncTimeRatio: number;
}

/** Two homes of two volunteers each (a1, a2 in home a; b1, b2 in b) in a lab of their own. */
export async function runHierarchical(opts: HierarchicalOptions = {}): Promise<HierarchicalFigures> {
  const uplinkMbit = opts.uplinkMbit ?? 10;
  const lab = await openVolunteerLab({ homes: ['a', 'b'], perHome: 2, uplinkMbit, log: opts.log ?? (() => {}) });
  try {
    return await measureHierarchical(lab, { ...opts, uplinkMbit });
  } finally {
    await lab.close();
  }
}

/** The flat job, then the one by homes, in `lab` (homes a and b of two hosts each). */
export async function measureHierarchical(lab: VolunteerLab, opts: HierarchicalOptions = {}): Promise<HierarchicalFigures> {
  const syncs = opts.syncs ?? 3;
  const uplinkMbit = opts.uplinkMbit ?? 10;
  const log = opts.log ?? (() => {});
  const run = async (byHomes: boolean): Promise<RunFigures> => {
    const job = await lab.runJob({
      preset: 'mlp-fashion', dataset: 'synthetic-blobs', strategy: 'localsgd', H: 2, pacing: 'fixed', trust: 'trusted', homeRings: byHomes,
      hyperparameters: { lr: 0.05, batchSize: 16 }, minWorkers: 4, maxWorkers: 4, targetSteps: 2 * syncs,
    // One at a time, homes interleaved: each is a member (its shard, hence its place in the flat ring) before the next starts.
    }, ['a1', 'b1', 'a2', 'b2']);
    const { jobId, rounds, uplinkBytes } = job;
    const times = rounds.filter((r) => r.mode === 'ring' && r.outcome === 'committed').map((r) => r.ms!).sort((x, y) => x - y);
    const homeOf = new Map(Object.values(job.volunteers).map((v) => [v.volunteerId, v.home]));
    const figures: RunFigures = {
      jobId, committed: times.length, rounds, uplinkBytes, uplinkBytesTotal: Object.values(uplinkBytes).reduce((x, y) => x + y, 0),
      syncMsP50: times.length ? times[Math.floor((times.length - 1) / 2)] : NaN, syncMsMean: times.length ? times.reduce((x, y) => x + y, 0) / times.length : NaN,
      ringHomes: (rounds[0]?.members ?? []).map((id) => homeOf.get(id) ?? '?'),
      frameBytesSent: Object.fromEntries(Object.entries(job.volunteers).map(([name, v]) => [name, v.bytesSent])),
    };
    log(`${byHomes ? 'by homes' : 'flat'}: ${JSON.stringify(figures)}`);
    return figures;
  };
  const flat = await run(false);
  const hierarchical = await run(true);
  return {
    homes: 2, tabsPerHome: 2, syncs, uplinkMbit: uplinkMbit || null, vectorBytes: layoutOf('mlp-fashion').length * 4, flat, hierarchical,
    uplinkBytesRatio: flat.uplinkBytesTotal / hierarchical.uplinkBytesTotal, syncTimeRatio: flat.syncMsP50 / hierarchical.syncMsP50,
  };
}
