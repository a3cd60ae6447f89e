// The honest case's price: robust group averaging (ROBUST_RULE, per-part owners) against plain ring
// allreduce at N = WORKERS, moving the same payloads — the LocalSGD deltas of one honest sync — over
// an in-memory network under a link model. Bytes are the collectives' own counters (frame headers
// included), mean over members; time is one exchange's wall time, median over reps after a warm-up.
//
// All members run in this one thread, so with unlimited links the time is this thread's CPU: every
// owner's screening and combining and every member's frame handling in turn, where real members do
// theirs at once on their own machines. `ownerAggregationMs` is what one owner adds per sync.
//
// `validated` is what an untrusted job's round costs: the group average, then the validation of the
// parts the server draws (protocol's checksFor, ≈ 21% of them; Group.validate), plus one round trip
// to the server between the two (the server names the parts once every result is in). The draw varies,
// so its bytes are the mean over the reps. The summary's overhead figures are `validated` ÷ ring.
import { Group, MemoryNetwork, Ring, type LinkFaults } from '@tabfleet/collective';
import type { Dataset } from '@tabfleet/data';
import { exchange, groupExchange, groupWire, holdOutTail, mlpWorkers, startWorkers, type Payload } from '@tabfleet/distributed';
import { aggregateWith, checksFor, mulberry32, screenContributions } from '@tabfleet/protocol';
import { CpuBackend } from '@tabfleet/tensor';
import { ROBUST_RULE, WORKERS, type JobSettings } from './byzantine-config';
import { CAPPED } from './convergence-config';
import { median } from './stats';

type Collective = 'ring' | 'group' | 'validated';

/** How links are limited, for each collective. */
export const LINK_MODELS: Record<string, { description: string; faults: Record<Collective, LinkFaults> }> = {
  unlimited: { description: 'no latency or bandwidth limit: the time is this thread\'s CPU (see ownerAggregationMs)', faults: { ring: {}, group: {}, validated: {} } },
  capped_link: {
    description: 'every link 10 Mbit/s and 40 ms one way (the convergence benchmark\'s CAPPED): a group member sends on its 15 links at once, so it gets 15 links\' worth of bandwidth',
    faults: { ring: CAPPED, group: CAPPED, validated: CAPPED },
  },
  capped_uplink: {
    description: 'every member\'s uplink 10 Mbit/s, 40 ms one way: a ring member sends on one link (10 Mbit/s); a group member sends on all its links at once in both ' +
      'phases, so each gets 1/15 of the uplink',
    faults: { ring: CAPPED, group: { ...CAPPED, bandwidth: CAPPED.bandwidth / (WORKERS - 1) }, validated: { ...CAPPED, bandwidth: CAPPED.bandwidth / (WORKERS - 1) } },
  },
};

/** The link model whose time ratio is the summary's honest_overhead_time: volunteers' home uplinks. */
export const HEADLINE_LINK = 'capped_uplink';

interface Measured {
  bytesPerWorker: number;
  exchangeMs: { median: number; min: number; max: number; samples: number[] };
}

export interface OverheadReport {
  workers: number;
  rule: string;
  payloadValues: number;
  reps: number;
  /** `bytesRatio`/`timeRatio`: validated ÷ ring; `averageOnly…`: the group average alone ÷ ring. */
  links: Record<string,
    { description: string; ring: Measured; group: Measured; validated: Measured; bytesRatio: number; timeRatio: number; averageOnlyBytesRatio: number; averageOnlyTimeRatio: number }>;
  /** One owner screening and combining the WORKERS contributions to its part, median over reps. */
  ownerAggregationMs: number;
}

/** Every worker's payload after the local work of one honest sync from the common start. */
async function honestPayloads(data: { train: Dataset; test: Dataset }, job: JobSettings): Promise<Payload[]> {
  const workers = mlpWorkers(new CpuBackend(), {
    workers: WORKERS, data: { train: holdOutTail(data.train, job.validationExamples).head, test: data.test }, batchSize: job.batchSize, optimizer: job.optimizer, seed: 1,
    strategy: { strategy: 'localsgd', H: job.H, compression: 'none', outerLr: 1, outerMomentum: 0 },
  });
  await startWorkers(workers);
  const payloads: Payload[] = [];
  for (const w of workers) {
    await w.strategy.local();
    payloads.push(await w.strategy.payload());
  }
  return payloads;
}

/** One exchange of `payloads` by every member at once, as runSyncs does it. */
async function exchangeOnce(kind: Collective, payloads: Payload[], faults: LinkFaults, round: number): Promise<{ ms: number; bytesPerWorker: number }> {
  const net = new MemoryNetwork({ faults });
  const ids = payloads.map((_, i) => `w${i}`);
  const opts = (i: number) => ({ transport: net.endpoint(ids[i]), members: ids, self: ids[i], jobId: 'overhead', round, deadlineMs: 120_000 });
  const members = ids.map((_, i) => (kind === 'ring' ? new Ring(opts(i)) : new Group(opts(i))));
  const t0 = performance.now();
  const combine = { rule: ROBUST_RULE };
  const averages = await Promise.all(members.map((m, i) => (m instanceof Group ? groupExchange(m, payloads[i], combine) : exchange(m as Ring, payloads[i]))));
  if (kind === 'validated') {
    // The server hears every result, then names the parts: one round trip before the validation.
    await new Promise((r) => setTimeout(r, 2 * (faults.latencyMs ?? 0)));
    const checks = checksFor(ids, mulberry32(round));
    await Promise.all(members.map((m, i) => (m as Group).validate((averages[i] as { contribution: Float32Array }).contribution, checks, groupWire(payloads[i], combine))));
  }
  const ms = performance.now() - t0;
  const bytesPerWorker = members.reduce((a, m) => a + m.counters.bytesOut, 0) / members.length;
  for (const m of members) m.close();
  return { ms, bytesPerWorker };
}

async function measure(kind: Collective, payloads: Payload[], faults: LinkFaults, reps: number): Promise<Measured> {
  const runs = [];
  for (let r = 1; r <= reps; r++) runs.push(await exchangeOnce(kind, payloads, faults, r));
  const bytes = new Set(runs.map((r) => r.bytesPerWorker));
  if (kind !== 'validated' && bytes.size !== 1) throw new Error(`${kind} sent different byte counts in identical exchanges: ${[...bytes].join(', ')}`);
  const samples = runs.map((r) => r.ms);
  return { bytesPerWorker: runs.reduce((a, r) => a + r.bytesPerWorker, 0) / runs.length, exchangeMs: { median: median(samples), min: Math.min(...samples), max: Math.max(...samples), samples } };
}

function ownerAggregationMs(payloads: Payload[], reps: number): number {
  const length = payloads[0].kind === 'dense' ? payloads[0].values.length : 0;
  const part = Math.floor(length / WORKERS);
  const parts = payloads.map((p) => (p.kind === 'dense' ? p.values.subarray(0, part) : new Float32Array(part)));
  const samples: number[] = [];
  for (let r = 0; r <= reps; r++) {
    const t0 = performance.now();
    const { accepted } = screenContributions(parts, part);
    aggregateWith(ROBUST_RULE, accepted.map((i) => parts[i]));
    if (r > 0) samples.push(performance.now() - t0); // the first one warms up
  }
  return median(samples);
}

export async function measureOverhead(data: { train: Dataset; test: Dataset }, job: JobSettings, linkModels: string[], reps: number, log: (line: string) => void): Promise<OverheadReport> {
  if (!linkModels.includes(HEADLINE_LINK)) throw new Error(`the overhead needs the ${HEADLINE_LINK} link model`);
  const payloads = await honestPayloads(data, job);
  // Warm both collectives' code paths up before anything is timed.
  for (const kind of ['ring', 'group', 'validated'] as const) await exchangeOnce(kind, payloads, {}, 0);
  const links: OverheadReport['links'] = {};
  for (const name of linkModels) {
    const model = LINK_MODELS[name];
    if (!model) throw new Error(`unknown link model ${name}`);
    const ring = await measure('ring', payloads, model.faults.ring, reps);
    const group = await measure('group', payloads, model.faults.group, reps);
    const validated = await measure('validated', payloads, model.faults.validated, reps);
    links[name] = {
      description: model.description, ring, group, validated,
      bytesRatio: validated.bytesPerWorker / ring.bytesPerWorker, timeRatio: validated.exchangeMs.median / ring.exchangeMs.median,
      averageOnlyBytesRatio: group.bytesPerWorker / ring.bytesPerWorker, averageOnlyTimeRatio: group.exchangeMs.median / ring.exchangeMs.median,
    };
    const mb = (m: Measured) => `${(m.bytesPerWorker / 1e6).toFixed(3)} MB ${m.exchangeMs.median.toFixed(0)} ms`;
    log(`overhead ${name} per worker per sync: ring ${mb(ring)}, group ${mb(group)}, group + validation ${mb(validated)}`);
  }
  const length = payloads[0].kind === 'dense' ? payloads[0].values.length : 0;
  return { workers: WORKERS, rule: ROBUST_RULE, payloadValues: length, reps, links, ownerAggregationMs: ownerAggregationMs(payloads, reps) };
}
