// `npm run bench -- groups`: 32 LocalSGD workers of the Fashion-MNIST MLP (WebGPU through Dawn in
// Node, one device shared, real Rings on the in-memory transport), averaged in one ring of 32 against
// Moshpit groups of 8 (a 8 × 4 grid: groups of 8, then of 4, placed anew every two syncs), at equal
// samples, 3 seeds. Reported: test accuracy of the members' mean model and of one member's own model,
// the consensus distance after every sync (max over members of ‖θᵢ − θ̄‖ / ‖θ̄‖), bytes per member, and
// a grouped run in which one member leaves mid-sync: its group re-runs without it, the others do not.
// Writes bench/results/groups.json (groups.quick.json with --quick).
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { MemoryNetwork } from '@tabfleet/collective';
import { mlpWorkers, runSyncs, startWorkers, type SimWorker, type SyncReport } from '@tabfleet/distributed';
import { fashionMnistFromDisk } from '@tabfleet/distributed/node';
import { repoRoot } from '@tabfleet/headless';
import { createNodeGpuBackend } from '@tabfleet/tensor/node';
import { benchCommand, runRecord } from './machine';
import type { BenchOptions } from './run';
import { median, spread } from './stats';

const WORKERS = 32;
const GROUP = 8;
/** Local steps per sync (quick: 4, a smoke test of the same path). */
const H = 8;
const QUICK_H = 4;
const BATCH = 32;

type Variant = 'ring' | 'moshpit' | 'moshpit-departure';

interface RunResult {
  variant: Variant;
  seed: number;
  syncs: number;
  samples: number;
  meanModelTestAccuracy: number;
  memberTestAccuracy: number;
  consensus: number[];
  bytesPerMember: number;
  exchangeMs: number;
  /** Per sync: groups and the attempts each took (grouped runs). */
  groupAttempts: number[][];
  departedAt: number | null;
}

/** The members' mean parameters, evaluated on the test set (written into the first member, which is done). */
async function meanModelAccuracy(workers: SimWorker[], examples: number): Promise<number> {
  const all = await Promise.all(workers.map((w) => w.engine.readParams()));
  const mean = new Float32Array(all[0].length);
  for (const p of all) for (let k = 0; k < mean.length; k++) mean[k] += p[k] / all.length;
  workers[0].engine.writeParams(mean);
  return (await workers[0].engine.evaluate(examples)).accuracy;
}

export async function run(opts: BenchOptions): Promise<void> {
  const file = opts.out ?? join(repoRoot, 'bench', 'results', opts.quick ? 'groups.quick.json' : 'groups.json');
  const seeds = opts.quick ? [1] : [1, 2, 3];
  const syncs = opts.quick ? 2 : 16;
  const h = opts.quick ? QUICK_H : H;
  // Test accuracy on the whole test set (quick: its first 2,000 examples).
  const testExamples = opts.quick ? 2_000 : Infinity;
  const log = (s: string) => console.log(`[groups] ${s}`);
  const t0 = Date.now();
  const backend = await createNodeGpuBackend();
  const data = await fashionMnistFromDisk();
  const results: RunResult[] = [];
  const variants: Variant[] = ['ring', 'moshpit', 'moshpit-departure'];
  for (const seed of seeds) {
    for (const variant of variants) {
      if (variant === 'moshpit-departure' && seed !== seeds[0]) continue;
      const workers = mlpWorkers(backend, {
        workers: WORKERS, data, batchSize: BATCH, seed, optimizer: { kind: 'sgd', lr: 0.05, momentum: 0.9, nesterov: true },
        strategy: { strategy: 'localsgd', H: h, compression: 'none', outerLr: 1, outerMomentum: 0 },
      });
      await startWorkers(workers);
      const departedAt = variant === 'moshpit-departure' ? Math.max(1, Math.floor(syncs / 2)) : null;
      const reports: SyncReport[] = await runSyncs(workers, new MemoryNetwork({ seed }), {
        syncs, consensus: true, deadlineMs: 3_000,
        ...(variant === 'ring' ? {} : { groups: { size: GROUP, seed } }),
        ...(departedAt ? { departures: { [departedAt]: [workers[WORKERS - 1].id] } } : {}),
        onSync: (r) => void log(`${variant} seed ${seed}: sync ${r.seq}, consensus ${r.consensus!.toExponential(2)}${r.groupAttempts ? `, group attempts ${r.groupAttempts.join('')}` : ''}`),
      });
      const staying = workers.filter((w) => reports.at(-1)!.ids.includes(w.id));
      const member = (await staying[1].engine.evaluate(testExamples)).accuracy;
      const meanModel = await meanModelAccuracy(staying, testExamples);
      const samples = reports.reduce((n, r) => n + r.ids.length * h * BATCH, 0);
      results.push({
        variant, seed, syncs: reports.length, samples, meanModelTestAccuracy: meanModel, memberTestAccuracy: member,
        consensus: reports.map((r) => r.consensus!), bytesPerMember: median(reports.map((r) => r.bytesSent.reduce((a, b) => a + b, 0) / r.ids.length)) * reports.length,
        exchangeMs: reports.reduce((a, r) => a + r.exchangeMs, 0), groupAttempts: reports.map((r) => r.groupAttempts ?? []), departedAt,
      });
      log(`${variant} seed ${seed}: mean model ${(100 * meanModel).toFixed(2)}%, a member ${(100 * member).toFixed(2)}%, final consensus ${reports.at(-1)!.consensus!.toExponential(2)}`);
    }
  }
  const of = (v: Variant) => results.filter((r) => r.variant === v);
  const departure = of('moshpit-departure')[0];
  const attemptsAtDeparture = departure.groupAttempts[departure.departedAt! - 1];
  const report = {
    benchmark: 'groups', ...runRecord(t0, benchCommand('groups', opts)), quick: opts.quick, adapter: backend.description,
    setup: { workers: WORKERS, groupSize: GROUP, grid: [GROUP, WORKERS / GROUP], H: h, batch: BATCH, syncs, seeds, strategy: 'localsgd', lr: 0.05 },
    results,
    spreads: Object.fromEntries(['ring', 'moshpit'].map((v) => [v, { meanModelTestAccuracy: spread(of(v as Variant).map((r) => r.meanModelTestAccuracy)),
      memberTestAccuracy: spread(of(v as Variant).map((r) => r.memberTestAccuracy)) }])),
    summary: {
      /** Test accuracy points of one ring of 32 over Moshpit groups of 8, members' mean model, median over seeds (goal ≤ 0.5). */
      grouped_accuracy_gap_pts: 100 * (median(of('ring').map((r) => r.meanModelTestAccuracy)) - median(of('moshpit').map((r) => r.meanModelTestAccuracy))),
      /** The same for one member's own model (grouped members differ; the ring's are equal). */
      grouped_member_accuracy_gap_pts: 100 * (median(of('ring').map((r) => r.memberTestAccuracy)) - median(of('moshpit').map((r) => r.memberTestAccuracy))),
      /** Consensus distance after the last sync, grouped, median over seeds. */
      grouped_final_consensus: median(of('moshpit').map((r) => r.consensus.at(-1)!)),
      /** Bytes a member sent, grouped ÷ ring (groups of 8 move 2·7/8 of the vector, the ring 2·31/32). */
      grouped_bytes_ratio: median(of('moshpit').map((r) => r.bytesPerMember)) / median(of('ring').map((r) => r.bytesPerMember)),
      /** In the sync a member left: groups that re-ran (should be 1, its own) of all groups. */
      departure_groups_rerun: attemptsAtDeparture.filter((a) => a > 1).length,
      departure_groups: attemptsAtDeparture.length,
    },
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  log(`summary ${JSON.stringify(report.summary)}`);
  log(`wrote ${file}`);
}
